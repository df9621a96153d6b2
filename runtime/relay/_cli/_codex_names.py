"""The names Codex 0.169 takes on its command line: its configuration's top-level keys and its
feature flags (``codex features list``). relay reads a Codex key or feature it has no
counterpart for as a warning, never as an error, so that a program written for Codex starts
relay with the flags it gives Codex; a name that is neither relay's nor Codex's stays an error
(a misspelt key is caught before anything runs).
"""

from __future__ import annotations

#: The top-level keys of Codex 0.169's ``config.toml`` (and so of its ``-c KEY=VALUE``).
_CONFIG_KEYS = """
    agents allow_login_shell analytics approval_policy approvals_reviewer apps
    apps_mcp_product_sku audio auto_review background_terminal_max_timeout chatgpt_base_url
    check_for_update_on_startup cli_auth_credentials_store compact_prompt debug
    default_permissions desktop developer_instructions disable_paste_burst
    disable_response_storage experimental_compact_prompt_file experimental_instructions_file
    experimental_realtime_start_instructions experimental_realtime_ws_backend_prompt
    experimental_realtime_ws_base_url experimental_realtime_ws_model
    experimental_realtime_ws_startup_context experimental_thread_config_endpoint
    experimental_thread_store experimental_use_unified_exec_tool features feedback
    file_opener forced_chatgpt_workspace_id forced_login_method ghost_snapshot
    hide_agent_reasoning history hooks include_apps_instructions
    include_collaboration_mode_instructions include_environment_context
    include_permissions_instructions instructions log_dir marketplaces
    mcp_oauth_callback_port mcp_oauth_callback_url mcp_oauth_credentials_store mcp_servers
    memories model model_auto_compact_token_limit model_auto_compact_token_limit_scope
    model_catalog_json model_context_window model_instructions_file model_provider
    model_providers model_reasoning_effort model_reasoning_summary
    model_reasoning_summary_format model_supports_reasoning_summaries model_verbosity notice
    notify openai_base_url oss_provider otel permissions personality
    plan_mode_reasoning_effort plugins profile profiles project_doc_fallback_filenames
    project_doc_max_bytes project_root_markers projects realtime review_model sandbox_mode
    sandbox_permissions sandbox_workspace_write service_tier shell_environment_policy
    show_raw_agent_reasoning skills sqlite_home suppress_unstable_features_warning
    tool_output_token_limit tool_suggest tools tui web_search windows zsh_path
"""

#: Codex 0.169's feature flags, as ``--enable``, ``--disable`` and ``features.NAME`` take them.
_FEATURES = """
    agent_message_board agent_message_board_mcp analytics_plan_history
    api_key_cyber_access_programs api_key_model_discovery app_server_websocket_compression
    apply_patch_freeform apply_patch_preserve_line_endings apply_patch_streaming_events apps
    apps_early_resource_discovery apps_mcp_path_override artifact async_compaction
    async_compaction_root_only auth_elicitation background_paginated_rollout_migration
    bedrock_setup_wizard browser_annotation_api browser_use browser_use_external
    browser_use_full_cdp_access chronicle cli_daybreak cli_resume_account_check code_mode
    code_mode_buffered_exec code_mode_host code_mode_host_grpc
    code_mode_host_output_truncation code_mode_interrupt code_mode_only
    code_mode_only_strict_3p_tools code_mode_prewarm code_mode_tool_description_first
    code_mode_tool_search codex_apps_mcp_2026_07_28 codex_git_commit collaboration_modes
    command_sessions_world_state compaction_image_budget computer_use
    concurrent_reasoning_summaries content_item_kinds context_management credential_masking
    critical_path_timing current_time_reminder cwd_relative_turn_diffs daemon_auto_start
    daybreak_program_propagation default_mode_request_user_input defer_mailbox_preemption
    deferred_executor deferred_tool_world_state elevated_windows_sandbox enable_fanout
    enable_mcp_apps enable_request_compression exec_permission_approvals
    executed_tool_call_metadata executor_capability_discovery
    executor_capability_discovery_v2 experimental_windows_sandbox
    external_agent_memory_import external_migration fast_mode gateway_setup_wizard
    gcp_setup_wizard goals guardian_approval guardian_conversation_history_tools
    guardian_denial_reconsideration guardian_enhanced_node_repl_transcripts guardian_ext
    guardian_include_additional_context guardian_native_multi_agent_history
    guardian_node_repl_transcript_images guardian_recorded_items
    guardian_reuse_parent_compaction guardian_root_handoff_context
    guardian_trust_orchestrator_connectors guardianv2 guardianv2_decisions_comparison
    guardianv3 hooks hosted_search_policy image_detail_original image_generation
    image_generation_animation image_resize_notice in_app_browser in_app_chat
    in_app_dictation in_app_local_automation in_app_updates in_app_voice
    incremental_exec_tools incremental_tools incremental_tools_legacy
    incremental_tools_legacy_gcp instant_interrupt interrupt_on_cancel item_ids js_repl
    js_repl_tools_only local_thread_store_compression local_thread_store_shared_compression
    login_shell_package_path mcp_2026_07_28 mcp_connection_sharing mcp_lazy_stdio_startup
    mcp_oauth_refresh_coordination mcp_tool_list_changed memories mentions_v2
    model_catalog_in_context multi_agent multi_agent_mode multi_agent_v2
    multi_agent_v2_dynamic_tools multi_env_copy_file network_proxy
    non_prefixed_mcp_tool_names nonfatal_clock_read_errors
    omit_app_server_notification_media omit_skill_descriptions output_token_replay
    personality plugin_discovery_prefetch plugin_hooks plugin_sharing plugins
    powershell_shell_version prediction_preserve_parent_tools prefer_mxc prevent_idle_sleep
    psp realtime_conversation reasoning_effort_override recommended_plugins
    remote_compaction_v2 remote_control remote_models remote_plugin request_permissions_tool
    request_rule resize_all_images respect_system_proxy responses_websockets
    responses_websockets_v2 retain_client_developer_messages retain_client_tool_outputs
    rollout_budget runtime_agent_instances runtime_metrics search_tool secret_auth_storage
    send_async_message send_message_to_user_async shell_snapshot shell_snapshot_v2
    shell_tool shell_zsh_fork simplified_selection_hints skill_catalog_deltas
    skill_env_var_dependency_prompt skill_mcp_dependency_install skill_search
    skip_host_skill_discovery sleep_tool sqlite stable_environment_tools
    standalone_web_search steer step_model_switching subagent_default_context_limits
    subagent_thread_environments suppress_model_change_announcements system_proxy_fallback
    terminal_resize_reflow terminal_visualization_instructions token_budget
    tool_call_mcp_elicitation tool_search tool_search_always_defer_mcp_tools tool_suggest
    transcript_v2 tui_app_server tui_extensions_statusline tui_multi_backend tui_workspace
    ultrafast_mode unavailable_dummy_tools unbounded_connection_retries undo unified_exec
    unified_exec_tty unified_exec_zsh_fork unified_image_budget untrusted_as_tool_output
    use_agent_identity use_legacy_landlock use_linux_sandbox_bwrap use_xaa view_image
    wake_on_agent_messages web_search_cached web_search_request windows_sandbox_service
    workspace_dependencies workspace_owner_usage_nudge worktrees write_stdin_approval
"""

#: The top-level keys of Codex 0.169's ``config.toml`` (and so of its ``-c KEY=VALUE``).
CODEX_CONFIG_KEYS = frozenset(_CONFIG_KEYS.split())

#: Codex 0.169's feature flags, as ``--enable``, ``--disable`` and ``features.NAME`` take them.
CODEX_FEATURES = frozenset(_FEATURES.split())

__all__ = ["CODEX_CONFIG_KEYS", "CODEX_FEATURES"]
