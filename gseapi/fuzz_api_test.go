package gseapi

import "testing"

// One target per request shape, so each shape gets the fuzzer's whole
// effort on its body (FuzzDecodeTask also mutates the API name) and
// `make chaos` can give each its own time.

// fuzzAPIs fuzzes a body decoded as each of apis, the ones sharing a shape.
func fuzzAPIs(f *testing.F, apis ...string) {
	for _, body := range fuzzSeeds(f) {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, api := range apis {
			checkTask(t, api, body)
		}
	})
}

func FuzzOperateProcess(f *testing.F)   { fuzzAPIs(f, APIOperateProcess) }
func FuzzOperateProc(f *testing.F)      { fuzzAPIs(f, APIOperateProc, APIOperateProcV2) }
func FuzzOperateProcMulti(f *testing.F) { fuzzAPIs(f, APIOperateProcMulti) }
func FuzzManageProc(f *testing.F)       { fuzzAPIs(f, APIManageProc) }
func FuzzProcInfo(f *testing.F) {
	fuzzAPIs(f, APIRegisterProcInfo, APIUpdateProcInfo, APIUnregisterProcInfo)
}
