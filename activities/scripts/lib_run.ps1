# Run runs one command line of the spec's language ($sh: bat or ps1) in
# $dir, bounded to $s seconds. The command is started by WMI
# (Win32_Process Create), outside the WinRM shell's job object: daemons it
# starts must outlive the shell, which ends them otherwise. Its output and
# exit code come back through temporary files.
function Run($sh, $cmd, $dir, $s) {
$o = [IO.Path]::GetTempFileName()
if ($sh -eq 'ps1') { $c = 'powershell.exe -NoProfile -NonInteractive -ExecutionPolicy Bypass -EncodedCommand ' + [Convert]::ToBase64String([Text.Encoding]::Unicode.GetBytes($cmd)) } else { $c = 'cmd.exe /d /s /c "' + $cmd + '"' }
$r = Invoke-CimMethod -ClassName Win32_Process -MethodName Create -Arguments @{CommandLine = 'cmd.exe /d /s /c "' + $c + ' >"' + $o + '" 2>&1 & call echo %^errorlevel% >"' + $o + '.rc""'; CurrentDirectory = $dir}
if ($r.ReturnValue -ne 0) { return @{rc = 96; to = 0; out = "process not created: $($r.ReturnValue)"} }
$t = 0; $w = [Diagnostics.Stopwatch]::StartNew()
while (Get-Process -Id $r.ProcessId) { if ($w.Elapsed.TotalSeconds -ge $s) { $t = 1; taskkill.exe /T /F /PID $r.ProcessId *> $null; break }; Start-Sleep -Milliseconds 100 }
$rc = 1; $v = "$(Get-Content -LiteralPath "$o.rc" -TotalCount 1)".Trim(); if ($v -match '^-?\d+$') { $rc = [int]$v }
$out = "$(Get-Content -LiteralPath $o -Raw)"; Remove-Item -LiteralPath $o, "$o.rc"
@{rc = $rc; to = $t; out = $out}
}
