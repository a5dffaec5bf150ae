# shellcheck shell=sh
# control.sh MARKFILE REQUEST SETUP CMD SECONDS OPFILES ATTEMPT LAST
# Writes the op's marker (MARKFILE "": none), then runs a control command:
# see control in lib_control.sh (OPFILES "": nothing noted).
# include: lib_control.sh
mark "$1" "$2"
control "$3" "$4" "$5" "$6" "$7" "$8"
