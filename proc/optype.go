package proc

import "fmt"

// OpType is the GSE op_type of operate_process and operate_proc.
type OpType int

const (
	OpStart      OpType = 0
	OpStop       OpType = 1
	OpStatus     OpType = 2
	OpRegister   OpType = 3 // mark as managed (托管)
	OpUnregister OpType = 4 // stop managing
	OpRestart    OpType = 7
	OpReload     OpType = 8
	OpKill       OpType = 9

	// Registry ops, drover's own numbers outside GSE's op_type range: what
	// register_proc_info, update_proc_info, unregister_proc_info and seed
	// 003's register/unregister become.
	OpSpecRegister   OpType = 100
	OpSpecUpdate     OpType = 101
	OpSpecUnregister OpType = 102

	// OpCheck is `starter hosts check`: reach each host, verify its key,
	// log in and try every account its registered specs run as. It is
	// drover's own, far from GSE's op_types and from the registry and
	// file ops; no GSE API accepts it as an op_type (see IsInternal).
	OpCheck OpType = 900
)

var opNames = map[OpType]string{
	OpStart: "start", OpStop: "stop", OpStatus: "status", OpRegister: "register",
	OpUnregister: "unregister", OpRestart: "restart", OpReload: "reload", OpKill: "kill",
}

var specOpNames = map[OpType]string{
	OpSpecRegister: "register_proc_info", OpSpecUpdate: "update_proc_info", OpSpecUnregister: "unregister_proc_info",
}

// IsInternal reports whether the op is one of drover's own that only drover
// starts (a registry op, the host check): an op_type sent through a GSE API
// never becomes one.
func (o OpType) IsInternal() bool { return o.IsSpecOp() || o == OpCheck }

// Valid reports whether the op_type is one GSE documents.
func (o OpType) Valid() bool { _, ok := opNames[o]; return ok }

// IsSpecOp reports whether the op changes the registry rather than a process.
func (o OpType) IsSpecOp() bool { _, ok := specOpNames[o]; return ok }

func (o OpType) String() string {
	if n, ok := opNames[o]; ok {
		return n
	}
	if n, ok := specOpNames[o]; ok {
		return n
	}
	if n, ok := fileOpNames[o]; ok {
		return n
	}
	if o == OpCheck {
		return "check"
	}
	return fmt.Sprintf("op_type(%d)", int(o))
}

// ParseOpName maps a verb such as "restart" back to its op_type.
func ParseOpName(name string) (OpType, bool) {
	for op, n := range opNames {
		if n == name {
			return op, true
		}
	}
	return 0, false
}
