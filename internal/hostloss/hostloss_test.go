package hostloss

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/drover-sh/drover/proc"
)

// TestLostHostAnswer: an op on a closed host workflow answers 9108, says
// how it ended and names both ways back; the error unwraps to ErrLost.
func TestLostHostAnswer(t *testing.T) {
	h := proc.HostID{IP: "10.0.0.2"}
	r := Answer(h, enums.WORKFLOW_EXECUTION_STATUS_TERMINATED)
	for _, want := range []string{"host:0:10.0.0.2", "terminated", "starter host restore 0:10.0.0.2", "starter host forget 0:10.0.0.2"} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("message %q does not say %q", r.Message, want)
		}
	}
	if r.Code != proc.CodeHostLost {
		t.Errorf("code %d, want %d", r.Code, proc.CodeHostLost)
	}
	err := fmt.Errorf("read: %w", &Error{Host: h, Status: enums.WORKFLOW_EXECUTION_STATUS_FAILED})
	if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "failed") {
		t.Errorf("%v: want ErrLost, saying failed", err)
	}
	if !AlreadyStarted(fmt.Errorf("start: %w", serviceerror.NewWorkflowExecutionAlreadyStarted("started", "", ""))) || AlreadyStarted(errors.New("unavailable")) {
		t.Error("AlreadyStarted misreads a refused start")
	}
}
