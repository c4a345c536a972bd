# Shared by run_e2e.sh and what_if_e2e.sh (sourced after they set BIN, the trainsim binary, and TMP, their
# temporary folder): one PASS/FAIL line per check, counted in $passes and $failures, and the checks of a command's
# exit code, output and bad-input behaviour. (The other CLI scripts use check_lib.sh's ok/FAIL lines.)
passes=0
failures=0
pass() {
    echo "PASS: $1"
    passes=$((passes + 1))
}
fail() {
    echo "FAIL: $1"
    shift
    local line
    for line in "$@"; do echo "      $line"; done
    failures=$((failures + 1))
}

# run NAME ARGS...: runs trainsim, stdout to $TMP/NAME.out, stderr to $TMP/NAME.err, exit code to $TMP/NAME.rc.
run() {
    local name=$1
    shift
    "$BIN" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    echo $? >"$TMP/$name.rc"
}
rc_of() { cat "$TMP/$1.rc"; }

# check_rc CHECK NAME EXPECTED
check_rc() {
    local got
    got=$(rc_of "$2")
    if [ "$got" = "$3" ]; then
        pass "$1: exit code $3"
    else
        fail "$1: exit code $got, expected $3" "stderr: $(head -c 400 "$TMP/$2.err")"
    fi
}

# check_has CHECK FILE TEXT...: FILE contains every TEXT (fixed strings).
check_has() {
    local check=$1 file=$2
    shift 2
    local missing=() text
    for text in "$@"; do
        grep -qF -- "$text" "$file" || missing+=("$text")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        pass "$check"
    else
        fail "$check" "missing in $(basename "$file"): ${missing[*]}"
    fi
}

# check_bad CHECK NAME TEXT... -- ARGS...: bad input. Exit code exactly 2, nothing on stdout, stderr is exactly one
# line (newline-terminated) holding every TEXT (the file and the field).
check_bad() {
    local check=$1 name=$2
    shift 2
    local texts=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        texts+=("$1")
        shift
    done
    shift
    run "$name" "$@"
    local rc lines err problems=() text
    rc=$(rc_of "$name")
    err=$TMP/$name.err
    lines=$(wc -l <"$err")
    [ "$rc" = 2 ] || problems+=("exit code $rc, expected 2")
    if [ "$lines" -ne 1 ] || [ -n "$(tail -c 1 "$err")" ]; then
        problems+=("stderr is not exactly one line ($lines newlines)")
    fi
    [ -s "$TMP/$name.out" ] && problems+=("stdout is not empty")
    for text in "${texts[@]}"; do
        grep -qF -- "$text" "$err" || problems+=("stderr lacks: $text")
    done
    if [ ${#problems[@]} -eq 0 ]; then
        pass "$check (exit 2: $(head -n 1 "$err"))"
    else
        fail "$check" "${problems[@]}" "stderr: $(head -c 400 "$err")"
    fi
}
