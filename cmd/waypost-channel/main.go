// Command waypost-channel is the always-on channel container of the Waypost AWS deployment
// (deploy/channel/Dockerfile): the channel hubs and their internal API, through which the Lambda functions
// announce commits, and GET /v0/feed/wait over the deployment's DynamoDB table, woken by those
// announcements, on one port (default :8788). Configuration: functions/config (config.VarsFor("channel")),
// --addr; `waypost-channel --help` lists it. See functions/channelhost.
package main

import "github.com/waypost/waypost/functions/channelhost"

func main() { channelhost.Main() }
