# signal.ps1 PID START FORCE WAIT_MS
# Stops the probed incarnation by PID, only while its creation time (in
# ticks since the boot's whole second, as parseWindowsProbe counts them)
# still is START: a reused pid is never touched. Without FORCE (1) it asks
# first (taskkill without /F) and forces after WAIT_MS. ($PID is
# PowerShell's own: the parameter is $Id.)
param([int]$Id, [long]$Start, [int]$Force, [int]$WaitMS)
$ErrorActionPreference = 'SilentlyContinue'
$b = (Get-CimInstance Win32_OperatingSystem).LastBootUpTime.ToUniversalTime().Ticks; $b -= $b % 10000000
$g = Get-Process -Id $Id
if (-not $g -or ($g.StartTime.ToUniversalTime().Ticks - $b) -ne $Start) { exit 0 }
if (-not $Force) { taskkill.exe /T /PID $Id *> $null; if ($g.WaitForExit($WaitMS)) { exit 0 } }
taskkill.exe /T /F /PID $Id *> $null
exit 0
