# shellcheck shell=sh
# checked_control.sh MARKFILE REQUEST SETUP CMD SECONDS OPFILES ATTEMPT LAST
#                    ANYEXIT WAIT PIDFILE BOOT_ID HZ PAGE MEM BOOT_TIME CPUS
#                    USER [GUARD ACCOUNT]
# control.sh, then, when its command completed (with status 0, or any
# status when ANYEXIT is 1), waits WAIT seconds and probes PIDFILE: the
# post-check costs no SSH round trip of its own. The control part's output
# is buffered by the command substitution; it is bounded (the command's
# own output is cut at 4 KiB). The probe follows a line
# "__drover_check__", which no probe line can be.
#
# With GUARD, the op's probe before its command shares the exec too: when
# the script runs as ACCOUNT and GUARD holds for PIDFILE (guard_holds),
# the command runs at once; otherwise nothing is run or written, and the
# script prints "__drover_guard__" and that probe, for the op to judge.
# Its probes report no clock: the op judges the process, not the host.
# include: lib_control.sh
# include: lib_probe.sh
# shellcheck disable=SC2034 # read by probe_host
noclock=1 u=${18}
if [ -n "${19-}" ]; then
  u=$(id -un)
  if [ "$u" != "${20-}" ] || ! guard_holds "${19}" "${11}"; then
    printf '__drover_guard__\n'
    probe_host "${12}" "${13}" "${14}" "${15}" "${16}" "${17}" "$u"
    probe_pids 0 1 "${11}" ""
    exit 0
  fi
fi
c=$(mark "$1" "$2"; control "$3" "$4" "$5" "$6" "$7" "$8")
printf '%s\n' "$c"
case $c in
*"__drover_rc__ rc=0 timeout=0") ;;
# Not a setup failure, which ends with setup=...
*" timeout=0") [ "$9" = 1 ] || exit 0 ;;
*) exit 0 ;;
esac
printf '__drover_check__\n'
[ "${10}" = 0 ] || sleep "${10}"
probe_host "${12}" "${13}" "${14}" "${15}" "${16}" "${17}" "$u"
probe_pids 0 1 "${11}" ""
