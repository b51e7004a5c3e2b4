package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableAPI is the part of the DynamoDB client CreateTable uses.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// CreateTable creates the store's table (pk S hash key, sk S range key, on-demand billing) for tests and
// tools; the deployed table is defined by the CDK app. It does not wait for the table to become active
// (emulators report no status; real DynamoDB needs a waiter before first use). A table that already exists
// is left as it is and is not an error.
func CreateTable(ctx context.Context, client TableAPI, name string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(AttrSK), KeyType: types.KeyTypeRange},
		},
	})
	var inUse *types.ResourceInUseException
	if errors.As(err, &inUse) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dynamo: create table %s: %w", name, err)
	}
	return nil
}

// ClientOptions returns the client options for an endpoint: none for real DynamoDB (endpoint ""), and for
// an emulator its base URL with response checksum validation off (emulators such as minidyn send no
// X-Amz-Crc32 header).
func ClientOptions(endpoint string) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		if endpoint == "" {
			return
		}
		o.BaseEndpoint = aws.String(endpoint)
		o.DisableValidateResponseChecksum = true
	}
}
