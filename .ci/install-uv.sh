#!/usr/bin/env bash
# Install uv when none is found, where uv's own installer puts it, so that every
# `uv run …` the README, the `make dev` banner and the console print works in a
# new terminal. `make bootstrap` runs it (every make target does).
#
#   UV_BIN_DIR=~/.local/bin .ci/install-uv.sh   # what the Makefile runs
#
# - uv on PATH, or already in UV_BIN_DIR (or in the .tools/ fallback): nothing to do.
# - Else uv's wheel from PyPI (the same standalone binary uv's installer downloads
#   from GitHub, which this needs no access to) goes into a throwaway virtualenv,
#   and its `uv` and `uvx` binaries are copied into UV_BIN_DIR: the Makefile's
#   choice of UV_INSTALL_DIR, XDG_BIN_HOME or ~/.local/bin, as uv's installer does.
# - When the folder is not on PATH, it is added as uv's installer does: UV_BIN_DIR/env,
#   sourced from ~/.profile (login shells) and from ~/.bashrc, ~/.bash_profile,
#   ~/.bash_login, ~/.zshenv, ~/.zshrc where they exist (a terminal that is not a login shell
#   keeps the PATH of the session, which had no ~/.local/bin if it did not exist
#   yet). UV_NO_MODIFY_PATH=1 (uv's installer's own switch) leaves them alone.
# - If that folder cannot be written, uv goes into .tools/bin/ with a hint.
set -euo pipefail

dir=${UV_BIN_DIR:?UV_BIN_DIR names the folder uv goes into}
spec=${UV_SPEC:-uv>=0.13,<0.14}   # the minor the lock file and deploy/Dockerfile use

if command -v uv >/dev/null 2>&1 || [ -x "$dir/uv" ] || [ -x .tools/bin/uv ]; then
    exit 0
fi

# Home-relative names for the messages and the line in the shell files.
pretty() { case "$1" in "$HOME"/*) printf '~/%s' "${1#"$HOME"/}" ;; *) printf '%s' "$1" ;; esac; }
quoted() { case "$1" in "$HOME"/*) printf '"$HOME/%s"' "${1#"$HOME"/}" ;; *) printf '"%s"' "$1" ;; esac; }

# Where a new terminal (a login shell, from a clean environment) finds uv.
login_finds_uv() {
    env -i HOME="$HOME" USER="${USER:-}" LOGNAME="${LOGNAME:-${USER:-}}" TERM=dumb \
        PATH=/usr/local/bin:/usr/bin:/bin bash -lc 'command -v uv' 2>/dev/null </dev/null || true
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m venv "$tmp/venv" >/dev/null \
    || ! "$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec"; then
    echo "error: could not install uv from PyPI with python3's venv and pip" \
        "(on Debian: apt-get install python3-venv); or install uv yourself and retry" >&2
    exit 1
fi

if ! { mkdir -p "$dir" && install -m 0755 "$tmp/venv/bin/uv" "$tmp/venv/bin/uvx" "$dir/"; } 2>/dev/null; then
    mkdir -p .tools/bin
    install -m 0755 "$tmp/venv/bin/uv" "$tmp/venv/bin/uvx" .tools/bin/
    echo "uv was not on PATH and $(pretty "$dir") cannot be written: installed $(.tools/bin/uv --version) into .tools/bin/."
    echo "hint: the README's \`uv run …\` commands need it on your PATH:" \
        "export PATH=\"$PWD/.tools/bin:\$PATH\" (or type .tools/bin/uv run …)"
    exit 0
fi
version=$("$dir/uv" --version)

case ":$PATH:" in
    *":$dir:"*)
        echo "uv was not on PATH: installed $version into $(pretty "$dir") (where uv's" \
            "installer puts it), which is on your PATH."
        exit 0
        ;;
esac
if [ -n "${UV_NO_MODIFY_PATH:-}" ]; then
    echo "uv was not on PATH: installed $version into $(pretty "$dir") (where uv's installer puts it)."
    echo "hint: add it to your PATH (UV_NO_MODIFY_PATH is set, so no shell file was changed):" \
        "export PATH=\"$dir:\$PATH\""
    exit 0
fi

# As uv's installer does: an env script that puts the folder first on PATH once,
# sourced from the shell files a new terminal reads.
cat > "$dir/env" <<EOF
#!/bin/sh
# add uv to PATH if it isn't there yet (written by disco's make bootstrap, as uv's installer does)
case ":\${PATH}:" in
    *:$(quoted "$dir"):*) ;;
    *) export PATH=$(quoted "$dir"):"\$PATH" ;;
esac
EOF
line=". $(quoted "$dir/env")"
changed=()
for rc in .profile .bashrc .bash_profile .bash_login .zshenv .zshrc; do
    file="$HOME/$rc"
    [ "$rc" = .profile ] || [ -f "$file" ] || continue
    grep -qxF "$line" "$file" 2>/dev/null && continue
    printf '\n%s\n' "$line" >> "$file"
    changed+=("~/$rc")
done
echo "uv was not on PATH: installed $version into $(pretty "$dir") (where uv's installer puts it)" \
    "and added it to PATH in ${changed[*]:-your shell files}: open a new terminal" \
    "(or run: $line) to type \`uv run …\`."
if [ "$(login_finds_uv)" != "$dir/uv" ]; then
    echo "hint: a login shell still does not find it; add $(pretty "$dir") to your PATH" >&2
fi
