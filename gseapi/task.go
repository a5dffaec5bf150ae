package gseapi

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// TaskPrefix starts every GSE task id.
const TaskPrefix = "GSETASK:"

// NewTaskID makes `GSETASK:<yyyymmddHHMMSS>:<unique>`, the task id callers
// know; drover uses it as the workflow id too.
func NewTaskID(now time.Time) string {
	n, err := rand.Int(rand.Reader, big.NewInt(1e12))
	if err != nil {
		n = big.NewInt(now.UnixNano() % 1e12)
	}
	return fmt.Sprintf("%s%s:%012d", TaskPrefix, now.UTC().Format("20060102150405"), n)
}

// ValidTaskID checks the shape of a task id a caller sends back.
func ValidTaskID(id string) error {
	if !strings.HasPrefix(id, TaskPrefix) {
		return fieldErr("task_id", "%q must start with %q", id, TaskPrefix)
	}
	if len(id) > 200 {
		return fieldErr("task_id", "is longer than 200 characters")
	}
	return nil
}
