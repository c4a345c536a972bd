# Shared by the CLI scripts (sourced): a temporary folder removed on exit, and `check NAME CONDITION...`, which
# prints "ok   NAME" or "FAIL NAME" and remembers a failure in $fail.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # check NAME CONDITION...
    local name="$1"
    shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
