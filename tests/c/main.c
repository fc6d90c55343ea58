/*
 * C test suite of agent_state: every behaviour of include/agent_state.h, checked through the
 * C ABI exactly as a C program uses it.
 *
 * Run by `make test-c` (target/c/test_c, no arguments) and `make test-valgrind` (the same binary
 * with AGENT_TEST_QUICK=1, which shrinks the loop counts). AGENT_TEST_ONLY=TEXT runs only the
 * tests whose name contains TEXT (while working on one topic). Store files live in a fresh mkdtemp
 * directory under /tmp, removed at the end. Exit status is non-zero when any check failed; the
 * last line is "N passed, M failed" (N and M count checks).
 *
 * Layout: check.h declares the check macros and small helpers (check.c, support.c) and the hook
 * fixtures (fixtures.c); the tests, one function per behaviour named for what it proves, are in
 * one file per topic (tests.h lists them); this file holds the list of tests and main().
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* main                                                                                       */
/* ------------------------------------------------------------------------------------------ */

typedef void (*TestFn)(void);

#define TEST(fn) { #fn, fn, NULL }
/* A test of SQLite files, paths or ":memory:": skipped on PostgreSQL, `why` printed. */
#define SQLITE_ONLY(fn, why) { #fn, fn, why }
static const struct {
    const char *name;
    TestFn fn;
    const char *sqlite_only;
} k_tests[] = {
    TEST(test_version_and_status_names),
    TEST(test_cancel_tokens_refuse_bad_arguments_and_handles),
    TEST(test_a_fired_token_fails_calls_at_once_and_unbinding_ends_it),
    TEST(test_a_write_waiting_for_a_lock_is_cancelled_from_another_thread),
    TEST(test_a_write_waiting_for_a_lock_ends_at_its_tokens_deadline),
    SQLITE_ONLY(test_uri_looking_paths_open_exactly_the_named_file,
                "file names that look like SQLite URIs"),
    TEST(test_last_error_is_per_thread_and_kept_by_successes),
    TEST(test_open_refuses_bad_arguments_and_options),
    TEST(test_bad_handles_are_refused_by_every_function),
    TEST(test_handles_are_never_reused),
    TEST(test_default_initial_state_is_the_empty_object),
    TEST(test_reading_never_persists_the_initial_state),
    TEST(test_first_write_persists_initial_state_merged_with_patch),
    TEST(test_replace_as_first_write_ignores_initial_state),
    TEST(test_stored_empty_object_is_not_nothing_stored),
    TEST(test_set_state_merges_like_the_reference_page),
    TEST(test_set_state_follows_rfc7396),
    TEST(test_member_order_is_preserved_and_new_members_appended),
    TEST(test_numbers_keep_their_exact_value_and_digits),
    TEST(test_output_is_compact_json_and_text_round_trips),
    TEST(test_set_state_returns_full_state_and_out_may_be_null),
    TEST(test_replace_state_keeps_nothing_of_the_previous_state),
    TEST(test_patch_must_be_a_json_object),
    TEST(test_malformed_json_is_refused),
    TEST(test_codec_refuses_what_it_cannot_store),
    TEST(test_merge_result_must_be_storable),
    TEST(test_too_large_state_is_refused_and_nothing_written),
    SQLITE_ONLY(test_the_store_remembers_its_size_cap,
                "a store's cap is store-wide, and the suite's PostgreSQL agents share one database (the core's PostgreSQL tests use a database of their own)"),
    SQLITE_ONLY(test_storage_refuses_files_that_are_not_agent_stores,
                "foreign and corrupt files"),
    SQLITE_ONLY(test_storage_errors_for_missing_directory_and_read_only,
                "missing directories and files"),
    SQLITE_ONLY(test_state_persists_and_new_store_file_is_private,
                "the store file's mode (persistence is also in test_two_handles_on_one_file_see_each_others_commits and the conformance vectors)"),
    SQLITE_ONLY(test_path_is_taken_as_raw_bytes,
                "file names as raw bytes"),
    SQLITE_ONLY(test_memory_store_is_private_to_its_handle,
                "\":memory:\" stores"),
    TEST(test_two_handles_on_one_file_see_each_others_commits),
    TEST(test_tagged_values_are_accepted_and_round_trip),
    TEST(test_tagged_values_are_leaves_for_merge),
    TEST(test_initial_state_hook_takes_precedence_and_is_called_each_time),
    TEST(test_initial_state_hook_can_answer_with_static_text),
    TEST(test_initial_state_hook_user_data_is_freed_exactly_once),
    TEST(test_initial_state_hook_failures_are_reported),
    TEST(test_own_handle_from_initial_state_hook_is_busy),
    SQLITE_ONLY(test_write_lock_held_by_another_handle_gives_busy,
                "SQLite's write lock: on PostgreSQL a write is optimistic, so a validator holds no lock"),
    TEST(test_state_changed_hook_sees_next_prev_and_patch),
    TEST(test_state_changed_hooks_run_in_order_and_can_be_removed),
    TEST(test_failed_hook_registration_frees_user_data),
    TEST(test_failing_hook_returns_hook_status_and_change_stays),
    TEST(test_hook_may_change_its_own_handle_and_nested_change_comes_after),
    TEST(test_hook_may_remove_itself),
    TEST(test_closing_handle_from_inside_its_own_hook),
    TEST(test_remove_or_close_during_delivery_defers_free_until_it_ends),
    TEST(test_get_state_versioned_reads_state_and_version_together),
    TEST(test_set_state_if_writes_only_at_the_expected_version),
    TEST(test_replace_state_if_writes_only_at_the_expected_version),
    TEST(test_compare_and_set_sees_other_handles_commits),
    TEST(test_state_changed_hooks_see_the_version_of_each_change),
    TEST(test_validator_rejects_with_its_message_and_nothing_is_written),
    TEST(test_validator_sees_the_change_about_to_commit),
    TEST(test_validator_gates_every_write_of_its_handle_and_no_other),
    TEST(test_validator_user_data_is_freed_exactly_once),
    TEST(test_own_handle_from_validator_is_busy),
    TEST(test_change_log_option_is_validated_and_recorded_in_the_store),
    TEST(test_change_log_keep_seconds_prunes_old_changes),
    TEST(test_poll_needs_the_change_log),
    TEST(test_poll_delivers_other_handles_changes_once_in_commit_order),
    TEST(test_poll_delivers_changes_of_another_process),
    TEST(test_poll_reports_pruned_changes_as_a_gap_once),
    TEST(test_changes_since_returns_the_documented_json_array),
    TEST(test_get_state_at_returns_retained_versions),
    TEST(test_restore_state_replaces_with_an_earlier_version),
    TEST(test_schema_an_older_state_is_upgraded_on_first_read_as_a_migration),
    TEST(test_schema_a_write_to_an_older_state_migrates_it_first),
    TEST(test_schema_an_older_program_gets_newer_schema_and_writes_nothing),
    TEST(test_schema_a_step_of_code_runs_and_a_failing_step_changes_nothing),
    TEST(test_schema_step_user_data_is_freed_exactly_once),
    TEST(test_schema_history_reads_as_stored_and_upgrade_state_upgrades),
    TEST(test_schema_functions_refuse_bad_arguments),
    TEST(test_json_patch_appends_and_applies_every_operation),
    TEST(test_json_patch_if_writes_only_at_the_expected_version),
    TEST(test_json_patch_hooks_validator_and_change_log_see_the_operations),
    TEST(test_json_patch_refuses_bad_input_and_writes_nothing),
    TEST(test_get_path_and_get_tail_read_one_place),
    TEST(test_get_path_and_get_tail_refuse_bad_pointers),
    TEST(test_store_list_pages_by_id_and_filters_by_prefix),
    SQLITE_ONLY(test_store_list_shows_a_files_single_agent_as_the_empty_id,
                "a SQLite file's single agent"),
    TEST(test_store_delete_of_an_open_handles_agent),
    TEST(test_store_delete_if_version_deletes_only_at_that_version),
    SQLITE_ONLY(test_store_delete_erases_the_agent_from_the_file_and_its_wal,
                "the bytes of the database file and its WAL"),
    SQLITE_ONLY(test_store_expire_dry_run_lists_and_deletes_in_batches,
                "expiry by milliseconds of idleness would reach the server's other agents"),
    TEST(test_store_functions_refuse_bad_arguments),
    TEST(test_buffers_are_owned_nul_terminated_and_safe_to_free_twice),
    TEST(test_buffer_may_be_read_and_freed_on_another_thread),
    TEST(test_threads_share_one_handle_without_lost_updates),
    TEST(test_nested_writes_from_hooks_keep_commit_order_across_threads),
    TEST(test_close_while_other_threads_write),
    TEST(test_two_processes_write_one_file),
    TEST(test_processes_may_create_one_store_at_once),
    TEST(test_processes_compare_and_set_one_counter),
    TEST(test_json_test_suite_corpus),
    TEST(test_watch_refuses_bad_arguments_options_and_handles),
    TEST(test_watch_queue_delivers_each_change_in_order_with_its_kind_patch_and_state),
    TEST(test_watch_states_option_gives_every_event_its_state),
    TEST(test_watch_prefix_follows_new_agents_and_ids_grow_and_shrink),
    TEST(test_watch_since_resumes_after_a_version_from_the_change_log),
    TEST(test_watch_a_deletion_is_one_deleted_event_and_a_new_first_write_follows),
    TEST(test_watch_callback_form_hands_over_each_change),
    TEST(test_watch_closing_from_inside_its_callback),
    TEST(test_watch_close_from_another_thread_wakes_a_waiting_next),
    TEST(test_watch_sees_another_process_and_a_child_cannot_use_the_parents_watch),
    TEST(test_watch_option_pushes_other_handles_and_processes_changes_to_the_hooks),
    /* Submitted calls last, after every test that forks: their worker threads would be in the
     * children's memory without the threads (memcheck: lost); the one that forks first. */
    TEST(test_submit_a_call_waiting_for_another_process_completes_later_or_is_cancelled),
    TEST(test_submit_every_op_through_the_callback_and_the_queue),
    TEST(test_submit_a_read_the_handles_copy_answers_completes_before_it_returns),
    TEST(test_submit_a_thousand_calls_in_flight_use_at_most_the_pools_threads),
    TEST(test_submit_refuses_bad_input_and_never_calls_done),
    TEST(test_submit_closing_the_handle_and_freeing_the_queue_with_calls_in_flight),
};

/* Removes the temp directory and everything in it (the tests create no subdirectories). */
static void remove_temp_dir(void)
{
    DIR *d = opendir(g_dir);
    struct dirent *e;
    char path[600];
    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", g_dir, e->d_name);
        if (unlink(path) != 0) {
            fprintf(stderr, "cannot remove %s: %s\n", path, strerror(errno));
        }
    }
    closedir(d);
    if (rmdir(g_dir) != 0) {
        fprintf(stderr, "cannot remove %s: %s\n", g_dir, strerror(errno));
    }
}

int main(void)
{
    size_t i;
    const char *quick = getenv("AGENT_TEST_QUICK");
    const char *backend = getenv("AGENT_STATE_TEST_BACKEND");
    const char *only = getenv("AGENT_TEST_ONLY");
    int skipped = 0;
    g_quick = quick != NULL && quick[0] != 0 && strcmp(quick, "0") != 0;
    if (backend != NULL && strcmp(backend, "postgres") == 0) {
        g_pg = 1;
        g_pg_uri = getenv("AGENT_STATE_TEST_PG_URI");
        if (g_pg_uri == NULL || g_pg_uri[0] == 0) {
            fprintf(stderr, "AGENT_STATE_TEST_BACKEND=postgres needs AGENT_STATE_TEST_PG_URI\n");
            return 2;
        }
        if (strncmp(g_pg_uri, "postgres://", 11) != 0 && strncmp(g_pg_uri, "postgresql://", 13) != 0) {
            fprintf(stderr, "AGENT_STATE_TEST_PG_URI=%s is not a postgres:// URI\n", g_pg_uri);
            return 2;
        }
        snprintf(g_agent_prefix, sizeof g_agent_prefix, "c_%ld_%lx_", (long)getpid(),
                 (long)time(NULL));
    } else if (backend != NULL && backend[0] != 0 && strcmp(backend, "sqlite") != 0) {
        fprintf(stderr, "AGENT_STATE_TEST_BACKEND=%s: want sqlite or postgres\n", backend);
        return 2;
    }
    if (mkdtemp(g_dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    if (g_pg) {
        AgentHandle probe = 0;
        AgentStatus rc = store_open(":memory:", NULL, &probe);
        printf("agent_state %s C tests%s on PostgreSQL (%s), agents %s*\n", agent_version(),
               g_quick ? " (quick)" : "", g_pg_uri, g_agent_prefix);
        if (rc != AGENT_OK) {
            /* Stop here: tests that wait for a hook or a child would wait for ever. */
            printf("FAIL opening an agent on the server: %s (%s)\n0 passed, 1 failed\n",
                   agent_status_name(rc), agent_last_error());
            rmdir(g_dir);
            return 1;
        }
        agent_close(probe);
    } else {
        printf("agent_state %s C tests%s, store files in %s\n", agent_version(),
               g_quick ? " (quick)" : "", g_dir);
    }
    for (i = 0; i < sizeof k_tests / sizeof k_tests[0]; i++) {
        int failed_before = g_failed;
        g_test = k_tests[i].name;
        if (only != NULL && strstr(k_tests[i].name, only) == NULL) {
            continue;
        }
        if (g_pg && k_tests[i].sqlite_only != NULL) {
            printf("skip %s (SQLite only: %s)\n", k_tests[i].name, k_tests[i].sqlite_only);
            skipped++;
            continue;
        }
        k_tests[i].fn();
        printf("%s %s\n", g_failed == failed_before ? "ok  " : "FAIL", k_tests[i].name);
        fflush(stdout);
    }
    g_test = "";
    remove_temp_dir();
    if (skipped > 0) {
        printf("%d tests skipped (SQLite only)\n", skipped);
    }
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
