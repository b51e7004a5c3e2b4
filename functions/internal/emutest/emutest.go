// Package emutest finds aws-lambda-rie for the tests of functions/ and gives the functions the environment of
// the S3 emulator (which tests get from store/s3blob/s3test.Require). A test skips when an emulator is
// missing, unless WAYPOST_REQUIRE_EMULATORS is set (scripts/test sets it after starting them): then it fails.
package emutest

import (
	"os"
	"testing"

	"github.com/waypost/waypost/internal/emulator"
	"github.com/waypost/waypost/store/s3blob/s3test"
)

// EnvRequire makes a missing emulator a test failure instead of a skip.
const EnvRequire = emulator.EnvRequire

// EnvRIE names the aws-lambda-rie binary (scripts/emulators sets it).
const EnvRIE = "WAYPOST_TEST_LAMBDA_RIE"

// RIE returns the path of aws-lambda-rie (WAYPOST_TEST_LAMBDA_RIE, PATH, $GOPATH/bin), or skips (fails) the
// test without one.
func RIE(t testing.TB) string {
	t.Helper()
	p := emulator.FindBinary("aws-lambda-rie", EnvRIE)
	if p == "" {
		emulator.Missing(t, "aws-lambda-rie not found ("+EnvRIE+", PATH, $GOPATH/bin): run the tests through scripts/test, "+
			"or go install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@v0.0.0-20261030222936-bef5c4ba774d")
	}
	return p
}

// AWSEnv returns the process environment of code talking to the emulators through the AWS SDK: region,
// the S3 emulator's static credentials (minidyn checks none), and no shared files or instance metadata.
func AWSEnv(s3 s3test.Env) map[string]string {
	return map[string]string{
		"AWS_REGION": s3.Region, "AWS_ACCESS_KEY_ID": s3.AccessKey, "AWS_SECRET_ACCESS_KEY": s3.SecretKey,
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
	}
}
