package workflows

import (
	"reflect"
	"testing"

	"github.com/drover-sh/drover/activities"
)

// TestActivityNamesAreRegistered: every activity name workflows schedule
// is a method of a struct Register puts on the worker, under that name:
// a worker registers a struct's methods by their names, and histories
// record the names.
func TestActivityNamesAreRegistered(t *testing.T) {
	owners := map[string]reflect.Type{
		HostOpActivity: reflect.TypeFor[*activities.Activities](), HostFilesActivity: reflect.TypeFor[*activities.Activities](),
		WatchActivity: reflect.TypeFor[*activities.Activities](), ShardWatchActivity: reflect.TypeFor[*activities.Activities](),
		DeliverActivity: reflect.TypeFor[*Dispatcher](), StatusActivity: reflect.TypeFor[*Dispatcher](),
		CheckActivity: reflect.TypeFor[*Dispatcher](), CancelHostsActivity: reflect.TypeFor[*Dispatcher](),
		AwaitChunkActivity: reflect.TypeFor[*Dispatcher](), HealthGateActivity: reflect.TypeFor[*Dispatcher](),
		ArmWatchActivity: reflect.TypeFor[*Dispatcher](), DispatchActivity: reflect.TypeFor[*Dispatcher](),
	}
	for name, typ := range owners {
		if _, ok := typ.MethodByName(name); !ok {
			t.Errorf("activity %q is not a method of %s", name, typ)
		}
	}
}
