# control.ps1 SETUP SHELL CMD TIMEOUT_S
# Runs CMD, a command line of SHELL (bat or ps1), in SETUP, bounded to
# TIMEOUT_S seconds, and ends with the same trailer as the Linux control
# script, so one parser reads both.
param([string]$Setup, [string]$Shell, [string]$Cmd, [int]$TimeoutS)
$ErrorActionPreference = 'SilentlyContinue'
if (-not (Test-Path -LiteralPath $Setup)) { "__drover_rc__ rc=97 timeout=0 setup=missing"; exit 0 }
if (-not (Test-Path -LiteralPath $Setup -PathType Container)) { "__drover_rc__ rc=97 timeout=0 setup=notdir"; exit 0 }
# include: lib_run.ps1
$x = Run $Shell $Cmd $Setup $TimeoutS
$x.out.Substring(0, [Math]::Min(4096, $x.out.Length))
"`n__drover_rc__ rc=$($x.rc) timeout=$($x.to)"
exit 0
