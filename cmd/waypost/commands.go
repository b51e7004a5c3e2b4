package main

import "github.com/spf13/cobra"

// commands lists the subcommands of waypost; each lives in its own file.
func commands() []*cobra.Command {
	return []*cobra.Command{
		newServeCmd(),
		newChannelServeCmd(),
		newMCPConfigCmd(),
		newBenchCmd(),
		newAdminCmd(),
		newBackupCmd(),
		newVerifyCmd(),
		newSendCmd(),
		newInboxCmd(),
		newAckCmd(),
		newStatusCmd(),
		newGetCmd(),
		newDescribeCmd(),
		newBlobCmd(),
		newMemoryCmd(),
		newWaitCmd(),
		newSmokeCmd(),
		newSubscribeCmd(),
		newSubscriptionsCmd(),
		newUnsubscribeCmd(),
	}
}
