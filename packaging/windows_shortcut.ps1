# Add a SegLens shortcut to this user's Start menu (no admin rights). Run it from the unpacked SegLens folder
# (the build copies it there), or give the folder:
#   powershell -ExecutionPolicy Bypass -File windows_shortcut.ps1 [-Folder C:\path\to\SegLens] [-Desktop] [-Remove]
# -Desktop also puts one on the desktop. Run it again after moving the folder.
param(
    [string]$Folder = $PSScriptRoot,
    [switch]$Desktop,
    [switch]$Remove
)
$ErrorActionPreference = "Stop"
$Folder = (Resolve-Path -LiteralPath $Folder).Path
$places = @([Environment]::GetFolderPath("Programs"))
if ($Desktop) { $places += [Environment]::GetFolderPath("Desktop") }
foreach ($place in $places) {
    $link = Join-Path $place "SegLens.lnk"
    if ($Remove) {
        if (Test-Path -LiteralPath $link) { Remove-Item -LiteralPath $link }
        Write-Output "removed $link"
        continue
    }
    $exe = Join-Path $Folder "SegLens.exe"
    if (-not (Test-Path -LiteralPath $exe)) { throw "$exe not found: is $Folder a SegLens folder?" }
    $icon = Join-Path $Folder "seglens.ico"
    if (-not (Test-Path -LiteralPath $icon)) { $icon = $exe }  # the icon is built into SegLens.exe too
    $shell = New-Object -ComObject WScript.Shell
    $shortcut = $shell.CreateShortcut($link)
    $shortcut.TargetPath = $exe
    $shortcut.WorkingDirectory = $Folder
    $shortcut.IconLocation = "$icon,0"
    $shortcut.Description = "SegLens: image model viewer"
    $shortcut.Save()
    Write-Output "created $link -> $exe"
}
