#!/usr/bin/env bash
# Plain bash tests of compose/smoke.sh's pure helpers. Each test_* function is one test;
# tests/compose/test_smoke_script.py runs them one by one (`helpers_test.sh test_name`).
# The recorded outputs are in this directory (see README lines at the top of each file).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../../compose/smoke.sh
source "$HERE/../../../compose/smoke.sh"

# assert_eq EXPECTED ACTUAL [WHAT]
assert_eq() {
    if [[ "$1" != "$2" ]]; then
        printf 'expected: %q\n  actual: %q\n  (%s)\n' "$1" "$2" "${3:-}" >&2
        exit 1
    fi
}

fixture() {
    grep -v '^#' "$HERE/$1"
}

test_stats_ledgers_in_list_order() {
    assert_eq $'10\n11\n12\n13\n14' "$(fixture stats-internal.json | stats_ledgers)"
}

test_stats_offloaded_only_complete_offloads() {
    assert_eq $'10\n11\n12\n13' "$(fixture stats-internal.json | stats_offloaded)"
}

test_stats_cursor_ledgers_skip_cursors_without_one() {
    assert_eq "20" "$(fixture stats-internal.json | stats_cursor_ledgers)"
}

test_zk_ledger_ids_from_the_shell_listing() {
    # Short (2-4-4) and long (3-4-4-4-4) hierarchical paths; BookKeeper's own znodes and the
    # shell's log lines are not ledgers.
    assert_eq $'1\n2\n12\n14\n20\n2147483648' "$(fixture zk-ls-R.txt | zk_ledger_ids /ledgers)"
}

test_zk_ledger_ids_of_another_root_only() {
    assert_eq "" "$(fixture zk-ls-R.txt | zk_ledger_ids /other)"
}

test_bk_ledger_ids_from_listledgers() {
    # Every `ledgerID: <id>` line, sorted; log lines (one mentioning a ledgerID mid-line) are not.
    assert_eq $'1\n2\n12\n14\n20\n2147483648' "$(fixture bk-listledgers.txt | bk_ledger_ids)"
}

test_bk_ledger_ids_of_an_empty_listing() {
    assert_eq "" "$(printf 'log line\n' | bk_ledger_ids)"
}

test_object_ledger_ids_from_mc_ls() {
    assert_eq $'12\n13' "$(fixture mc-ls.txt | object_ledger_ids)"
}

test_complete_object_ledger_ids_need_data_and_index() {
    assert_eq "12" "$(fixture mc-ls.txt | complete_object_ledger_ids)"
}

test_status_fields_are_numbers() {
    assert_eq "0" "$(echo '{"dead_letter_backlog": 0}' | status_field dead_letter_backlog)"
    assert_eq "7" "$(echo '{"estimated_in_flight": 7}' | status_field estimated_in_flight)"
}

test_id_sets() {
    assert_eq $'1\n3' "$(ids_minus $'3\n1\n2' '2 4')"
    assert_eq "2" "$(ids_common '1 2 3' $'2\n4')"
    assert_eq "3" "$(ids_count $'1\n\n2 3\n')"
    assert_eq "1 2 3" "$(ids_inline $'3\n1\n2\n1')"
    assert_eq "" "$(ids_minus '' '1')"
}

test_check_gone_passes_only_when_none_is_left() {
    assert_eq "PASS s: 2 trimmed gone (10 11)" "$(check_gone s trimmed '10 11' '12 13')"
    local out
    out="$(check_gone s trimmed '10 11' '11 12')" && exit 1
    assert_eq "FAIL s: trimmed still present: 11" "$out"
}

test_check_gone_refuses_to_prove_absence_from_nothing() {
    local out
    out="$(check_gone s trimmed '10' '')" && exit 1
    assert_eq "FAIL s: the listing is empty or failed: absence of trimmed not proved" "$out"
    out="$(check_gone s trimmed '' '12')" && exit 1
    assert_eq "FAIL s: no trimmed to check" "$out"
}

test_check_kept_names_what_is_missing() {
    assert_eq "PASS s: 2 listed present (12 13)" "$(check_kept s listed '12 13' '12 13 14')"
    local out
    out="$(check_kept s listed '12 13' '13')" && exit 1
    assert_eq "FAIL s: listed missing: 12" "$out"
}

test_report_counts_failures() {
    FAILURES=0
    report PASS a ok >/dev/null
    report FAIL b bad >/dev/null
    report SKIP c later >/dev/null
    assert_eq "1" "$FAILURES"
}

test_unhealthy_services() {
    assert_eq $'bookie\nbroker' "$(fixture compose-ps.txt | unhealthy_services 'zookeeper bookie broker')"
}

test_ledgers_before_cut() {
    assert_eq $'10\n11' "$(ledgers_before_cut $'10\n11\n12' 2)"
}

if [[ $# -ne 1 || "$(type -t "$1")" != function || "$1" != test_* ]]; then
    echo "usage: $0 test_name" >&2
    exit 2
fi
"$1"
