package testbed

import (
	"go.temporal.io/api/workflowservice/v1"
)

// quietLogger keeps readiness polling from flooding test output.
type quietLogger struct{}

func (quietLogger) Debug(string, ...interface{}) {}
func (quietLogger) Info(string, ...interface{})  {}
func (quietLogger) Warn(string, ...interface{})  {}
func (quietLogger) Error(string, ...interface{}) {}

func describeDefault() *workflowservice.DescribeNamespaceRequest {
	return &workflowservice.DescribeNamespaceRequest{Namespace: "default"}
}
