package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestMain stops the jsii runtime (a node child process) before exiting. The jsii runtime unpacks itself
// into $TMPDIR and reads its JSII_* variables before any test runs, so those are set by the caller
// (scripts/test points TMPDIR at a scratch directory and silences node-version warnings).
func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

// synthesized is one synthesized stack.
type synthesized struct {
	stack    *Stack
	template assertions.Template
	json     map[string]any
}

// testSettings are the default settings with function binaries and a channel build context that exist:
// dummy bootstrap files in a temporary directory (the tests need no build), and the repository's own
// deploy/channel/Dockerfile when it is there (a stub otherwise).
func testSettings(t *testing.T) Settings {
	t.Helper()
	s := DefaultSettings()
	s.FunctionsDir = filepath.Join(t.TempDir(), "functions")
	for _, name := range Functions() {
		dir := filepath.Join(s.FunctionsDir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("#!/bin/sh\n# test stand-in for "+name+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, s.ChannelDockerfile)); err == nil {
		s.ChannelContextDir = root
	} else {
		t.Logf("no %s yet: synthesizing with a stub Dockerfile", s.ChannelDockerfile)
		stub := filepath.Join(t.TempDir(), "channel-context")
		if err := os.MkdirAll(filepath.Join(stub, filepath.Dir(s.ChannelDockerfile)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stub, s.ChannelDockerfile), []byte("FROM scratch\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s.ChannelContextDir = stub
	}
	return s
}

// synth builds the stack of s in a fresh app with the cdk-nag aspect applied, as main does, and
// synthesizes it. Asset staging is off: assets are fingerprinted where they are, not copied.
func synth(t *testing.T, s Settings) synthesized {
	t.Helper()
	app := awscdk.NewApp(&awscdk.AppProps{
		Outdir:  jsii.String(filepath.Join(t.TempDir(), "cdk.out")),
		Context: &map[string]any{"aws:cdk:disable-asset-staging": true},
	})
	st := NewStack(app, StackName(s.Stage), s, nil)
	ApplyNag(app)
	tmpl := assertions.Template_FromStack(st.Stack, nil)
	return synthesized{stack: st, template: tmpl, json: *tmpl.ToJSON()}
}
