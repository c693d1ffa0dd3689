# The stages of .ci/run, sourced by it (and by tests/test_ci.py, which shows each can fail).
#   run   NAME COMMAND...   runs now, in the foreground (for what later stages need:
#                           an install, a tool)
#   start NAME COMMAND...   starts in the background with its own log; `join` waits for
#                           every started stage and prints each log whole, in order
#   tests ARGS...           pytest ARGS, where exit 5 (no test ran) is a failure
#   exits N COMMAND...      passes only when COMMAND exits N (a planted bug is caught)
#   finish                  prints every stage's time and verdict; exit 1 if any failed
# A failing stage does not stop the ones after it (one run shows every failure); `finish`
# fails the run.
logs="$(mktemp -d)"
names=() codes=() times=() pending=()
run_start=$(date +%s)

_record() {  # NAME CODE SECONDS
    names+=("$1"); codes+=("$2"); times+=("$3")
    local verdict="ok"; [ "$2" -eq 0 ] || verdict="FAILED (exit $2)"
    echo "=== stage '$1': $verdict in $3 s"
}

run() {
    local name="$1"; shift
    echo "=== stage '$name': $*"
    local t0; t0=$(date +%s)
    "$@"; local rc=$?
    _record "$name" "$rc" "$(( $(date +%s) - t0 ))"
    return 0
}

start() {
    local name="$1"; shift
    local i=${#pending[@]}
    echo "=== stage '$name' started in the background: $*"
    ( t0=$(date +%s); "$@" > "$logs/$i.log" 2>&1; rc=$?
      echo "$rc $(( $(date +%s) - t0 ))" > "$logs/$i.done" ) &
    pending+=("$name|$!")
}

join() {
    local i entry name rc seconds
    for i in "${!pending[@]}"; do
        entry="${pending[$i]}"; name="${entry%|*}"
        wait "${entry##*|}"
        read -r rc seconds < "$logs/$i.done" || { rc=1; seconds=0; }
        echo "--- stage '$name' (background) log:"
        cat "$logs/$i.log"
        _record "$name" "$rc" "$seconds"
    done
    pending=()
    rm -f "$logs"/*.log "$logs"/*.done
}

tests() {
    pytest "$@"; local rc=$?
    [ "$rc" -ne 5 ] || echo "pytest $*: no test ran (exit 5): nothing was checked"
    return "$rc"
}

exits() {
    local want="$1"; shift
    "$@"; local rc=$?
    [ "$rc" -eq "$want" ] || { echo "$*: exit $rc, expected $want"; return 1; }
}

finish() {
    local i failed=0
    echo "=== stages"
    for i in "${!names[@]}"; do
        printf '%6s s  %-4s %s\n' "${times[$i]}" "$([ "${codes[$i]}" -eq 0 ] && echo ok || echo FAIL)" \
            "${names[$i]}"
        [ "${codes[$i]}" -eq 0 ] || failed=1
    done
    echo "=== ${#names[@]} stages in $(( $(date +%s) - run_start )) s"
    [ "${#names[@]}" -gt 0 ] || { echo "no stage ran"; exit 1; }
    [ "$failed" -eq 0 ] || { echo "CI FAILED"; exit 1; }
    echo "CI passed"
}

