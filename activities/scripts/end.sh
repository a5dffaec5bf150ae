# shellcheck shell=sh
# end.sh OPFILES ATTEMPT...
# Marks the op cancelled, then kills the process group each of the
# ATTEMPTs noted, if the process the note names still runs (its start time
# is the noted one: the pid may have gone to another process since). Only a
# file the account owns is read, so another user cannot name a pid for it
# to kill. Marks a day old go too: a cancelled op is never run again, so
# its mark is needed only while its attempts may still be starting.
# include: lib_control.sh
base=$1; shift
: > "$base.cancelled" 2>/dev/null
find /tmp -maxdepth 1 -name 'drover-ctl-*.cancelled' -mmin +1440 -delete 2>/dev/null
for a; do
  ( n=$base-$a.pid
    [ -O "$n" ] || exit 0
    read -r p ps < "$n"; rm -f "$n"
    case "$p" in ''|*[!0-9]*) exit 0;; esac
    startof "$p"
    # shellcheck disable=SC2154 # so is set by startof (lib_control.sh)
    [ "$p" -gt 1 ] && [ -n "$ps" ] && [ "$so" = "$ps" ] && killcmd "$p" )
done
exit 0
