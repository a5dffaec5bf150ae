package dispatch

import "testing"

// TestCheckBatchCutShortIsRetriedNotAnswered: as for status, a check batch
// whose own context ends while it reads registries answers nothing.
func TestCheckBatchCutShortIsRetriedNotAnswered(t *testing.T) {
	testBatchCutShort(t, (*Dispatcher).Check)
}
