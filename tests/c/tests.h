/*
 * The C suite's tests, one function per behaviour, by the file that holds it; main.c lists
 * them in the order they run.
 */
#ifndef AGENT_STATE_TEST_TESTS_H
#define AGENT_STATE_TEST_TESTS_H

/* abi.c */
void test_version_and_status_names(void);
void test_last_error_is_per_thread_and_kept_by_successes(void);
void test_open_refuses_bad_arguments_and_options(void);
void test_bad_handles_are_refused_by_every_function(void);
void test_handles_are_never_reused(void);
void test_buffers_are_owned_nul_terminated_and_safe_to_free_twice(void);
void test_buffer_may_be_read_and_freed_on_another_thread(void);

/* state.c */
void test_default_initial_state_is_the_empty_object(void);
void test_reading_never_persists_the_initial_state(void);
void test_first_write_persists_initial_state_merged_with_patch(void);
void test_replace_as_first_write_ignores_initial_state(void);
void test_stored_empty_object_is_not_nothing_stored(void);
void test_set_state_merges_like_the_reference_page(void);
void test_set_state_follows_rfc7396(void);
void test_member_order_is_preserved_and_new_members_appended(void);
void test_numbers_keep_their_exact_value_and_digits(void);
void test_output_is_compact_json_and_text_round_trips(void);
void test_set_state_returns_full_state_and_out_may_be_null(void);
void test_replace_state_keeps_nothing_of_the_previous_state(void);

/* codec.c */
void test_patch_must_be_a_json_object(void);
void test_malformed_json_is_refused(void);
void test_codec_refuses_what_it_cannot_store(void);
void test_merge_result_must_be_storable(void);
void test_too_large_state_is_refused_and_nothing_written(void);
void test_the_store_remembers_its_size_cap(void);
void test_tagged_values_are_accepted_and_round_trip(void);
void test_tagged_values_are_leaves_for_merge(void);
void test_json_test_suite_corpus(void);

/* storage.c */
void test_storage_refuses_files_that_are_not_agent_stores(void);
void test_storage_errors_for_missing_directory_and_read_only(void);
void test_state_persists_and_new_store_file_is_private(void);
void test_uri_looking_paths_open_exactly_the_named_file(void);
void test_path_is_taken_as_raw_bytes(void);
void test_memory_store_is_private_to_its_handle(void);
void test_two_handles_on_one_file_see_each_others_commits(void);

/* init_hook.c */
void test_initial_state_hook_takes_precedence_and_is_called_each_time(void);
void test_initial_state_hook_can_answer_with_static_text(void);
void test_initial_state_hook_user_data_is_freed_exactly_once(void);
void test_initial_state_hook_failures_are_reported(void);
void test_own_handle_from_initial_state_hook_is_busy(void);
void test_write_lock_held_by_another_handle_gives_busy(void);

/* hooks.c */
void test_state_changed_hook_sees_next_prev_and_patch(void);
void test_state_changed_hooks_run_in_order_and_can_be_removed(void);
void test_failed_hook_registration_frees_user_data(void);
void test_failing_hook_returns_hook_status_and_change_stays(void);
void test_hook_may_change_its_own_handle_and_nested_change_comes_after(void);
void test_hook_may_remove_itself(void);
void test_closing_handle_from_inside_its_own_hook(void);
void test_remove_or_close_during_delivery_defers_free_until_it_ends(void);

/* versions.c */
void test_get_state_versioned_reads_state_and_version_together(void);
void test_set_state_if_writes_only_at_the_expected_version(void);
void test_replace_state_if_writes_only_at_the_expected_version(void);
void test_compare_and_set_sees_other_handles_commits(void);
void test_state_changed_hooks_see_the_version_of_each_change(void);

/* validator.c */
void test_validator_rejects_with_its_message_and_nothing_is_written(void);
void test_validator_sees_the_change_about_to_commit(void);
void test_validator_gates_every_write_of_its_handle_and_no_other(void);
void test_validator_user_data_is_freed_exactly_once(void);
void test_own_handle_from_validator_is_busy(void);

/* poll.c */
void test_change_log_option_is_validated_and_recorded_in_the_store(void);
void test_change_log_keep_seconds_prunes_old_changes(void);
void test_poll_needs_the_change_log(void);
void test_poll_delivers_other_handles_changes_once_in_commit_order(void);
void test_poll_delivers_changes_of_another_process(void);
void test_poll_reports_pruned_changes_as_a_gap_once(void);

/* history.c */
void test_changes_since_returns_the_documented_json_array(void);
void test_get_state_at_returns_retained_versions(void);
void test_restore_state_replaces_with_an_earlier_version(void);

/* store.c */
void test_store_list_pages_by_id_and_filters_by_prefix(void);
void test_store_list_shows_a_files_single_agent_as_the_empty_id(void);
void test_store_delete_of_an_open_handles_agent(void);
void test_store_delete_if_version_deletes_only_at_that_version(void);
void test_store_delete_erases_the_agent_from_the_file_and_its_wal(void);
void test_store_expire_dry_run_lists_and_deletes_in_batches(void);
void test_store_functions_refuse_bad_arguments(void);

/* threads.c */
void test_threads_share_one_handle_without_lost_updates(void);
void test_nested_writes_from_hooks_keep_commit_order_across_threads(void);
void test_close_while_other_threads_write(void);

/* cancel.c */
void test_cancel_tokens_refuse_bad_arguments_and_handles(void);
void test_a_fired_token_fails_calls_at_once_and_unbinding_ends_it(void);
void test_a_write_waiting_for_a_lock_is_cancelled_from_another_thread(void);
void test_a_write_waiting_for_a_lock_ends_at_its_tokens_deadline(void);

/* processes.c */
void test_two_processes_write_one_file(void);
void test_processes_may_create_one_store_at_once(void);
void test_processes_compare_and_set_one_counter(void);

/* schema.c */
void test_schema_an_older_state_is_upgraded_on_first_read_as_a_migration(void);
void test_schema_a_write_to_an_older_state_migrates_it_first(void);
void test_schema_an_older_program_gets_newer_schema_and_writes_nothing(void);
void test_schema_a_step_of_code_runs_and_a_failing_step_changes_nothing(void);
void test_schema_step_user_data_is_freed_exactly_once(void);
void test_schema_history_reads_as_stored_and_upgrade_state_upgrades(void);
void test_schema_functions_refuse_bad_arguments(void);

/* json_patch.c */
void test_json_patch_appends_and_applies_every_operation(void);
void test_json_patch_if_writes_only_at_the_expected_version(void);
void test_json_patch_hooks_validator_and_change_log_see_the_operations(void);
void test_json_patch_refuses_bad_input_and_writes_nothing(void);
void test_get_path_and_get_tail_read_one_place(void);
void test_get_path_and_get_tail_refuse_bad_pointers(void);

/* watch.c */
void test_watch_queue_delivers_each_change_in_order_with_its_kind_patch_and_state(void);
void test_watch_states_option_gives_every_event_its_state(void);
void test_watch_prefix_follows_new_agents_and_ids_grow_and_shrink(void);
void test_watch_since_resumes_after_a_version_from_the_change_log(void);
void test_watch_a_deletion_is_one_deleted_event_and_a_new_first_write_follows(void);
void test_watch_callback_form_hands_over_each_change(void);
void test_watch_closing_from_inside_its_callback(void);
void test_watch_close_from_another_thread_wakes_a_waiting_next(void);
void test_watch_sees_another_process_and_a_child_cannot_use_the_parents_watch(void);
void test_watch_refuses_bad_arguments_options_and_handles(void);
void test_watch_option_pushes_other_handles_and_processes_changes_to_the_hooks(void);

/* submit.c */
void test_submit_every_op_through_the_callback_and_the_queue(void);
void test_submit_a_read_the_handles_copy_answers_completes_before_it_returns(void);
void test_submit_a_call_waiting_for_another_process_completes_later_or_is_cancelled(void);
void test_submit_a_thousand_calls_in_flight_use_at_most_the_pools_threads(void);
void test_submit_refuses_bad_input_and_never_calls_done(void);
void test_submit_closing_the_handle_and_freeing_the_queue_with_calls_in_flight(void);

#endif
