package gseapi

import (
	"errors"

	"github.com/drover-sh/drover/proc"
)

// Response is the ESB envelope every API answers with.
type Response struct {
	Result  bool   `json:"result"`
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data"`
}

// OK wraps data in a success envelope.
func OK(data any) Response {
	return Response{Result: true, Code: CodeOK, Message: "success", Data: data}
}

// Failure wraps an error; field errors become bad requests.
func Failure(code int, err error) Response {
	var fe *FieldError
	if errors.As(err, &fe) && code == 0 {
		code = CodeBadRequest
	}
	if code == 0 {
		code = CodeInternal
	}
	return Response{Result: false, Code: code, Message: err.Error(), Data: nil}
}

// TaskData is operate_process's answer.
type TaskData struct {
	TaskID string `json:"task_id"`
}

// HostResultJSON is one entry of get_proc_operate_result's data.
type HostResultJSON struct {
	ErrorCode int    `json:"error_code"`
	ErrorMsg  string `json:"error_msg"`
	Content   string `json:"content"`
}

// ResultData renders per-item results as get_proc_operate_result's data,
// each under the key key gives it.
func ResultData(results []proc.KeyedResult, key func(proc.KeyedResult) string) map[string]HostResultJSON {
	out := make(map[string]HostResultJSON, len(results))
	for _, r := range results {
		out[key(r)] = HostResultJSON{ErrorCode: int(r.Code), ErrorMsg: r.Message, Content: r.Content}
	}
	return out
}
