package proc

// Code is a per-host error_code as GSE callers branch on it. The GSE codes
// keep their documented meaning; drover adds its own, in the 9100 range, for
// failures an agent never had, so callers can tell them from 117.
type Code int

const (
	CodeSuccess        Code = 0
	CodeRunning        Code = 115   // still in progress: poll again
	CodeUnreachable    Code = 117   // could not reach the host at all
	CodeAlreadyRunning Code = 828   // start refused: already running
	CodeNotRunning     Code = 829   // stop not needed / not registered
	CodeBadOpType      Code = 832   // unknown op_type
	CodePostCheck      Code = 836   // post-check failed
	CodeAlreadyExists  Code = 850   // register refused: already registered
	CodeCommandFailed  Code = 65535 // a control command failed

	CodeAuthFailed    Code = 9101 // SSH/WinRM authentication refused
	CodeHostKey       Code = 9102 // host key unknown or changed; WinRM TLS certificate not verified
	CodeSudoRefused   Code = 9103 // sudo to the account refused
	CodeUnknownHost   Code = 9104 // host is not in the inventory
	CodeTimeout       Code = 9105 // connected, but the op exceeded op_timeout
	CodeNotRegistered Code = 9106 // process has no registered spec on the host
	CodeBadSpec       Code = 9107 // the spec cannot be run on this host
	CodeUnhealthy     Code = 9110 // rollout: the op succeeded, but the process did not stay alive and healthy for min_healthy
	CodeNotRun        Code = 9111 // rollout: stopped (aborted or out of failure budget) before this host's batch
	CodeHostLost      Code = 9108 // the host's workflow was terminated or failed: registry and supervision stopped
	CodeCancelled     Code = 9109 // the task was cancelled; error_msg says whether the op ran
	CodeInternal      Code = 9199 // drover itself failed; see error_msg
)

// Message is the default error_msg for a code when nothing more specific is known.
func (c Code) Message() string {
	switch c {
	case CodeSuccess:
		return "success"
	case CodeRunning:
		return "in progress"
	case CodeUnreachable:
		return "host unreachable"
	case CodeAlreadyRunning:
		return "process already running"
	case CodeNotRunning:
		return "process not running"
	case CodeBadOpType:
		return "unknown op_type"
	case CodePostCheck:
		return "post-check failed"
	case CodeAlreadyExists:
		return "process already registered"
	case CodeCommandFailed:
		return "control command failed"
	case CodeAuthFailed:
		return "authentication refused"
	case CodeHostKey:
		return "host key verification failed"
	case CodeSudoRefused:
		return "sudo refused"
	case CodeUnknownHost:
		return "host not in inventory"
	case CodeTimeout:
		return "operation timed out"
	case CodeNotRegistered:
		return "process not registered on this host"
	case CodeBadSpec:
		return "process spec not runnable on this host"
	case CodeUnhealthy:
		return "not alive and healthy for min_healthy after the op"
	case CodeNotRun:
		return "not run: the rollout stopped before this host"
	case CodeHostLost:
		return "host workflow closed: restore or forget it"
	case CodeCancelled:
		return "cancelled"
	}
	return "internal error"
}
