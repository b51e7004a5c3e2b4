package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/waypost/waypost/functions/config"
)

// notDeployed names the variables a function reads (config.VarsFor) that the stack leaves unset on
// purpose, with the reason. Any other variable a function reads and the template does not set is missing.
func notDeployed() map[string]string {
	return map[string]string{
		config.EnvBlobPrefix:           "no prefix: every object key starts with spaces/, which the IAM grants name",
		config.EnvInlineBodyMax:        "the default (4096 bytes) is the limit docs/dynamodb.md measured",
		config.EnvDynamoDBEndpoint:     "emulators only",
		config.EnvS3Endpoint:           "emulators only",
		config.EnvSQSEndpoint:          "emulators only",
		config.EnvAdminSecret:          "the value form is for tests and emulators; the function gets the secret's ARN",
		config.EnvCursorKey:            "the value form is for tests and emulators; the function gets the secret's ARN",
		config.EnvChannelSecret:        "the value form is for tests and emulators; the function gets the secret's ARN",
		config.EnvWebhookAllowLoopback: "tests only: a deployment never lets webhooks reach loopback addresses",
	}
}

// notDeployedChannel is notDeployed for the channel container, which ECS gives the secrets' values
// (injected from Secrets Manager at task start) instead of their ARNs.
func notDeployedChannel() map[string]string {
	return map[string]string{
		config.EnvBlobPrefix:       notDeployed()[config.EnvBlobPrefix],
		config.EnvDynamoDBEndpoint: "emulators only",
		config.EnvS3Endpoint:       "emulators only",
		config.EnvCursorKeyARN:     "ECS injects the value (WAYPOST_CURSOR_KEY) from the same secret",
		config.EnvChannelSecretARN: "ECS injects the value (WAYPOST_CHANNEL_SECRET) from the same secret",
	}
}

// checkEnvironment compares, for each function and the channel container, the environment in the
// template with what functions/config says that process reads, and loads the process's configuration
// from the template's variables (values CloudFormation resolves at deploy time stand in as placeholders).
func checkEnvironment(t *testing.T, sy synthesized) {
	for _, m := range []map[string]string{notDeployed(), notDeployedChannel()} {
		for name := range m {
			if !slices.Contains(config.EnvVars(), name) {
				t.Errorf("the test's unset list names %s, which functions/config does not know", name)
			}
		}
	}
	if !sameSet(config.Functions(), append(Functions(), TargetChannel)) {
		t.Errorf("functions/config knows %v, the stack deploys %v and the channel container", config.Functions(), Functions())
	}
	refs := map[string]map[string]string{} // variable → process → what it points at
	for _, name := range Functions() {
		fn := sy.resourceByID(t, sy.logicalID(sy.stack.Functions[name]))
		env := map[string]any{}
		if vars, ok := get(fn.Props, "Environment", "Variables").(map[string]any); ok {
			env = vars
		}
		checkProcessEnv(t, name, env, notDeployed(), refs)
	}
	tasks := sy.resourcesOf("AWS::ECS::TaskDefinition")
	if len(tasks) != 1 {
		t.Fatalf("%d task definitions", len(tasks))
	}
	containers := list(tasks[0].Props["ContainerDefinitions"])
	if len(containers) != 1 {
		t.Fatalf("%d containers", len(containers))
	}
	env := map[string]any{}
	for _, e := range list(get(containers[0], "Environment")) {
		env[get(e, "Name").(string)] = get(e, "Value")
	}
	for _, e := range list(get(containers[0], "Secrets")) {
		name := get(e, "Name").(string)
		if _, dup := env[name]; dup {
			t.Errorf("channel: %s both plain and secret", name)
		}
		env[name] = get(e, "ValueFrom")
	}
	checkProcessEnv(t, TargetChannel, env, notDeployedChannel(), refs)

	// Shared values: one table, bucket, cursor key and channel secret for every process; the functions
	// announce to the API (which routes /internal/v0 to the channel service).
	for _, group := range [][]string{
		{config.EnvTable}, {config.EnvBucket},
		{config.EnvCursorKeyARN, config.EnvCursorKey}, {config.EnvChannelSecretARN, config.EnvChannelSecret},
		{config.EnvChannelURL},
	} {
		targets := map[string][]string{}
		for _, v := range group {
			for proc, target := range refs[v] {
				targets[target] = append(targets[target], proc)
			}
		}
		if len(targets) > 1 {
			t.Errorf("%v point at different things: %v", group, targets)
		}
	}
	for proc, target := range refs[config.EnvChannelURL] {
		if target != sy.resourcesOf("AWS::ApiGatewayV2::Api")[0].ID {
			t.Errorf("%s: %s points at %s, not the HTTP API", proc, config.EnvChannelURL, target)
		}
	}
}

// checkProcessEnv checks one process's environment env against config.VarsFor(process) and loads its
// configuration from it. refs collects what each variable's value refers to.
func checkProcessEnv(t *testing.T, process string, env map[string]any, unset map[string]string, refs map[string]map[string]string) {
	t.Helper()
	reads, err := config.VarsFor(process)
	if err != nil {
		t.Errorf("%s: %v", process, err)
		return
	}
	for name := range env {
		if !slices.Contains(reads, name) {
			t.Errorf("%s: the stack sets %s, which it does not read (unused)", process, name)
		}
	}
	for _, name := range reads {
		if _, ok := env[name]; ok {
			continue
		}
		if _, ok := unset[name]; !ok {
			t.Errorf("%s: reads %s, which the stack does not set (missing)", process, name)
		}
	}
	values := map[string]string{}
	for name, v := range env {
		if s, ok := v.(string); ok {
			values[name] = s
			continue
		}
		// Resolved by CloudFormation at deploy time: long enough for the key-length checks.
		values[name] = "resolved-at-deploy-" + strings.Repeat("x", 32)
		if refs[name] == nil {
			refs[name] = map[string]string{}
		}
		refs[name][process] = refTo(v)
	}
	lookup := func(name string) (string, bool) { v, ok := values[name]; return v, ok }
	if _, err := config.LoadFor(process, lookup); err != nil {
		t.Errorf("%s: loading its configuration from the template's variables: %v", process, err)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
