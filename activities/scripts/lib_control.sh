# shellcheck shell=sh
# The control command's functions, included by the scripts that run one
# or end one. Their output ends with the trailer parseControl reads:
# "__drover_rc__ rc=N timeout=0|1", and " setup=WHY" when the command
# could not be run at all (the message is built from the spec, in Go).
#
# A task op's command is noted in its op files (opfiles.go), named from
# OPFILES: OPFILES-ATTEMPT.pid holds "PGID STARTTICKS" of the command the
# attempt started, OPFILES.lock is held while a command is started and
# noted, and OPFILES.cancelled marks the op cancelled.

# startof PID sets so to the process's start time (field 22 of its stat),
# or to nothing when there is no such process: with its pid, it names one
# process until a reboot, so a note is never taken for a later process
# given the same pid. It always succeeds. The shell reads the stat itself,
# in the caller's process; only a comm with a newline in it needs cat.
startof() {
  so=; s=; { IFS= read -r s < "/proc/$1/stat"; } 2>/dev/null || [ -n "$s" ] || return 0
  case $s in *") "*) ;; *) s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0 ;; esac
  # shellcheck disable=SC2086 # the stat's fields, one word each
  set -- ${s##*) }; so=${20}
}

# killcmd PID kills the command PID started with setsid, its process group;
# until its setsid has run there is no such group, and the command itself
# is all there is to kill.
killcmd() { { kill -KILL -"$1" || kill -KILL "$1"; } 2>/dev/null; }

# mark FILE REQUEST writes the op's marker, which tells an attempt run
# again that this very op acted on the process; "" FILE writes none.
mark() { [ -z "$1" ] || printf '%s' "$2" > "$1" 2>/dev/null; }

# control SETUP CMD SECONDS [OPFILES ATTEMPT LAST] runs CMD (shell by
# design: *_cmd fields are the caller's shell) in SETUP. The command gets
# its own session (setsid) and stdio that is not the SSH channel, so
# daemons it starts outlive the SSH session and never hold the op open. A
# watchdog kills the command's process group when it runs past SECONDS;
# daemons that detached themselves into their own session are left alone.
#
# With OPFILES (a task op), under the op's lock, it first looks for a
# command of this op still running, noted by attempts 1 to LAST: an
# attempt lost with its worker, or with its workflow task, left it. It
# then starts nothing, waits for that command as if it were its own (its
# own watchdog went with the lost attempt), and reports it ended. Once it
# has noted its own command as ATTEMPT's, it ends it at once if the op was
# cancelled meanwhile (the cancel found no note yet).
control() {
  setup=$1 cmd=$2 secs=$3 base=${4-} attempt=${5-} last=${6-0}
  [ -e "$setup" ] || { printf '__drover_rc__ rc=97 timeout=0 setup=missing\n'; exit 0; }
  [ -d "$setup" ] || { printf '__drover_rc__ rc=97 timeout=0 setup=notdir\n'; exit 0; }
  cd "$setup" 2>/dev/null || { printf '__drover_rc__ rc=97 timeout=0 setup=denied\n'; exit 0; }
  if [ -n "$base" ]; then
    lock=$base.lock
    # The lock is a file made with noclobber, by printf: no fork, and a
    # failed redirection of a special builtin (:) would end the shell. A
    # lock left by a script that died holding it is broken after 2 s, a
    # file or, from a release before, a directory.
    k=0; until { set -C; printf "" > "$lock"; } 2>/dev/null; do
      k=$((k+1)); [ $k -lt 20 ] || { rm -f "$lock"; rmdir "$lock"; k=0; } 2>/dev/null; sleep 0.1
    done
    set +C
    trap 'rm -f "$lock"' EXIT
    a=1
    while [ "$a" -le "$last" ]; do
      f=$base-$a.pid; a=$((a+1))
      [ -O "$f" ] || continue
      read -r q qs < "$f" 2>/dev/null; case "$q" in ''|*[!0-9]*) continue;; esac
      startof "$q"
      if [ "$q" -le 1 ] || [ -z "$qs" ] || [ "$so" != "$qs" ]; then continue; fi
      rm -f "$lock"; trap - EXIT
      i=0; while [ $i -lt $((2 * secs)) ] && startof "$q" && [ "$so" = "$qs" ]; do sleep 0.5; i=$((i+1)); done
      t=0; startof "$q"; if [ "$so" = "$qs" ]; then t=1; kill -KILL -"$q" 2>/dev/null; fi
      echo "the command an earlier attempt of this op started was still running (process group $q): waited for it"
      printf '\n__drover_rc__ rc=0 timeout=%d\n' "$t"; exit 0
    done
  fi
  # The output's file is new, made with noclobber (never through a link
  # someone left); mktemp only when one of its name is there.
  out=${TMPDIR:-/tmp}/drover-out.$$
  { set -C; printf "" > "$out"; } 2>/dev/null ||
    out=$(mktemp "${TMPDIR:-/tmp}/drover.XXXXXX" 2>/dev/null) || { set +C; printf '__drover_rc__ rc=98 timeout=0 setup=notemp\n'; exit 0; }
  set +C
  setsid sh -c "$cmd" </dev/null >"$out" 2>&1 &
  p=$!
  startof "$p"; ps=$so
  if [ -n "$base" ]; then
    note=$base-$attempt.pid
    # A new file (noclobber: never through a link someone left), else the
    # note a lost attempt of this number left is replaced.
    { set -C; echo "$p $ps" > "$note"; } 2>/dev/null || { rm -f "$note"; echo "$p $ps" > "$note"; }
    set +C; rm -f "$lock"; trap - EXIT
    [ -e "$base.cancelled" ] && killcmd "$p"
  fi
  # The watchdog knows the command by its pid and start time, and is
  # stopped once the command is reaped: on a busy host a pid comes round
  # again within seconds, and a group that took it is not this command's.
  # It exits 3 when it killed the command, deaf by then to the TERM that
  # stops it once the command is reaped.
  ( i=0; while [ $i -lt "$secs" ] && startof "$p" && [ "$so" = "$ps" ]; do sleep 1; i=$((i+1)); done
    startof "$p"; trap '' TERM
    if [ -n "$ps" ] && [ "$so" = "$ps" ] && killcmd "$p"; then exit 3; fi ) </dev/null >/dev/null 2>&1 &
  wd=$!
  wait "$p"; rc=$?
  kill "$wd" 2>/dev/null; wait "$wd" 2>/dev/null; w=$?; t=0; [ "$w" != 3 ] || t=1
  [ ! -s "$out" ] || head -c 4096 "$out"
  rm -f "$out" ${base:+"$note"}
  printf '\n__drover_rc__ rc=%d timeout=%d\n' "$rc" "$t"
}
