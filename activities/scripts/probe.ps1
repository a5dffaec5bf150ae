# probe.ps1 WINDOW_MS CHECKS PIDFILE...
# Prints the probe lines parseWindowsProbe reads, for each PIDFILE, with a
# second sample of CPU after WINDOW_MS (0: none). CHECKS, JSON or "", are
# extra lines (winCheck): the first line of a version command, the exit
# code of a health command, a file's md5. Numbers reach the output by
# string interpolation, which PowerShell formats with the invariant culture
# whatever the host's locale; times are .NET ticks (100 ns) in UTC. It
# exits 0 explicitly: powershell's exit code is otherwise whether the last
# statement succeeded, and a missing config file is no failed probe.
param([long]$WindowMS, [string]$Checks)
$files = @($args)
$ErrorActionPreference = 'SilentlyContinue'
$os = Get-CimInstance Win32_OperatingSystem; $cs = Get-CimInstance Win32_ComputerSystem
"H`t$($cs.NumberOfLogicalProcessors)`t$($cs.TotalPhysicalMemory)`t$($os.LastBootUpTime.ToUniversalTime().Ticks)`t$([DateTime]::UtcNow.Ticks)`t$((Get-Date).ToString('zzz'))`t$env:USERNAME"
$ids = @(); $i = 0; $w1 = [DateTime]::UtcNow.Ticks
foreach ($f in $files) {
$n = [int](Test-Path -LiteralPath $f -PathType Leaf); $id = 0
if ($n) { $t = "$(Get-Content -LiteralPath $f -TotalCount 1)" -replace '\D', ''; if ($t.Length -gt 0 -and $t.Length -lt 10) { $id = [int]$t } }
$g = $null; if ($id) { $g = Get-Process -Id $id }
if ($g) { $c = Get-CimInstance Win32_Process -Filter "ProcessId=$id"
"P`t$i`t1`t$id`t1`t$($g.StartTime.ToUniversalTime().Ticks)`t$($g.UserProcessorTime.Ticks)`t$($g.PrivilegedProcessorTime.Ticks)`t$($g.WorkingSet64)`t$($g.Threads.Count)`t$($g.ProcessName)"
"X`t$i`t$($c.ExecutablePath)"; "C`t$i`t$($c.CommandLine -replace '[\t\r\n]', ' ')"
} else { "P`t$i`t$n`t$id`t0" }
$ids += $id; $i++ }
$w2 = $w1
if ($WindowMS -gt 0) { Start-Sleep -Milliseconds $WindowMS; $w2 = [DateTime]::UtcNow.Ticks; $i = 0
foreach ($id in $ids) { if ($id) { $g = Get-Process -Id $id; if ($g) { "Q`t$i`t$($g.TotalProcessorTime.Ticks)" } }; $i++ } }
"T`t$w1`t$w2"
if ($Checks) {
# include: lib_run.ps1
foreach ($k in (ConvertFrom-Json $Checks)) {
if ($k.kind -eq 'md5') { "$($k.tag)$("$((Get-FileHash -LiteralPath $k.path -Algorithm MD5).Hash)".ToLower())"; continue }
$x = Run $k.shell $k.cmd $k.setup 10
if ($k.kind -eq 'version') { "$($k.tag)$((($x.out -split '\r?\n')[0]) -replace '\t', ' ')" } else { "$($k.tag)$($x.rc)" } } }
exit 0
