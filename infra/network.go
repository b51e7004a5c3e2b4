package main

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/jsii-runtime-go"
)

// vpcLinkAZMapping is the CloudFormation mapping of DefaultVPCLinkAZIDs (region → az0, az1).
const vpcLinkAZMapping = "VpcLinkAzIds"

// placeSubnets puts the VPC's public subnets in Availability Zones where API Gateway offers HTTP API VPC
// links, by AZ ID (names like us-east-1a map to different zones in different accounts): ids when given
// (context availabilityZoneIds), else the deploy region's entry of DefaultVPCLinkAZIDs, looked up by
// CloudFormation so the stack stays environment-agnostic. A region without an entry fails at deploy time
// with "Mapping key not found"; set availabilityZoneIds for it (README, deploy section).
func placeSubnets(stack awscdk.Stack, vpc awsec2.Vpc, ids []string) {
	subnets := *vpc.PublicSubnets()
	var pick func(i int) *string
	if len(ids) > 0 {
		pick = func(i int) *string { return jsii.String(ids[i]) }
	} else {
		mapping := map[string]*map[string]any{}
		for region, az := range DefaultVPCLinkAZIDs() {
			mapping[region] = &map[string]any{"az0": az[0], "az1": az[1]}
		}
		m := awscdk.NewCfnMapping(stack, jsii.String(vpcLinkAZMapping), &awscdk.CfnMappingProps{Mapping: &mapping})
		pick = func(i int) *string { return m.FindInMap(awscdk.Aws_REGION(), jsii.String(fmt.Sprintf("az%d", i)), nil) }
	}
	if len(subnets) != 2 {
		panic(fmt.Errorf("the VPC has %d public subnets, want 2", len(subnets)))
	}
	for i, sn := range subnets {
		cfn := sn.Node().DefaultChild().(awsec2.CfnSubnet)
		cfn.AddPropertyDeletionOverride(jsii.String("AvailabilityZone"))
		cfn.AddPropertyOverride(jsii.String("AvailabilityZoneId"), pick(i))
	}
}
