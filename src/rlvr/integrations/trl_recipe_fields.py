"""The keys TRL itself reads from a recipe, as data: what `rlvr convert-config` reports and `rlvr train --from-trl`
refuses (rlvr.integrations.trl_recipe) when a recipe holds a key outside them and outside rlvr's own tables
(rlvr.integrations.trl_recipe_keys). TRL parses a recipe with transformers' HfArgumentParser into its dataclasses, and
a key none of them has stops it: `trl grpo --config` hands it to `accelerate launch`, which refuses an option it does
not know, and open-r1's scripts raise "Unknown arguments from config file". Such a key is usually a misspelling, and
TRL's default would otherwise stand in for it without a word.

Read from the sources, not typed: the field names of TRL 1.16.0's GRPOConfig (with transformers' TrainingArguments,
both 4.56.2, the oldest TRL 1.16 takes, and 5.x), ModelConfig, ScriptArguments, GRPOScriptArguments and
DatasetMixtureConfig; of every version of open-r1's src/open_r1/configs.py; and accelerate's launch options (with
`env` and `accelerate_config`, which TRL's CLI reads itself).
"""

from __future__ import annotations

import difflib

# TRL 1.16.0's dataclasses, with TrainingArguments of transformers 4.56.2 and 5.x
TRL_FIELDS = frozenset(
    """
    accelerator_config activation_checkpointing activation_checkpointing_kwargs adafactor adam_beta1 adam_beta2
    adam_epsilon attn_implementation auto_find_batch_size average_tokens_across_devices batch_eval_metrics beta
    bf16 bf16_full_eval bnb_4bit_quant_storage bnb_4bit_quant_type cache_implementation cast_lm_head_to_fp32
    chat_template_kwargs data_seed dataloader_drop_last dataloader_in_order dataloader_multiprocessing_context
    dataloader_num_workers dataloader_persistent_workers dataloader_pin_memory dataloader_prefetch_factor
    dataset_config dataset_name dataset_streaming dataset_test_split dataset_train_split datasets ddp_backend
    ddp_broadcast_buffers ddp_bucket_cap_mb ddp_find_unused_parameters ddp_static_graph ddp_timeout debug
    deepspeed delta disable_dropout disable_tqdm do_eval do_predict do_train ds3_gather_for_generation dtype
    enable_jit_checkpoint entropy_coef entropy_coef_delta entropy_coef_max entropy_coef_min entropy_target
    epsilon epsilon_high eval_accumulation_steps eval_delay eval_do_concat_batches eval_on_start eval_steps
    eval_strategy eval_use_gather_object fp16 fp16_backend fp16_full_eval fp16_opt_level fsdp fsdp_config
    fsdp_min_num_params fsdp_transformer_layer_cls_to_wrap full_determinism generation_batch_size
    generation_kwargs gradient_accumulation_steps gradient_checkpointing gradient_checkpointing_kwargs
    greater_is_better group_by_length half_precision_backend hub_always_push hub_model_id hub_private_repo
    hub_revision hub_strategy hub_token ignore_bias_buffers ignore_data_skip importance_sampling_level
    include_for_metrics include_inputs_for_metrics include_num_input_tokens_seen include_tokens_per_second
    jit_mode_eval label_names label_smoothing_factor learning_rate length_column_name liger_kernel_config
    load_best_model_at_end load_in_4bit load_in_8bit local_rank log_completions log_completions_hub_repo
    log_level log_level_replica log_multimodal log_on_each_node log_unique_prompts logging_dir
    logging_first_step logging_nan_inf_filter logging_steps logging_strategy lora_alpha lora_dropout
    lora_modules_to_save lora_r lora_target_modules lora_target_parameters lora_task_type loss_type
    lr_scheduler_kwargs lr_scheduler_type mask_truncated_completions max_completion_length max_grad_norm
    max_steps max_tool_calling_iterations metric_for_best_model min_p model_init_kwargs model_name_or_path
    model_revision mp_parameters multi_objective_aggregation neftune_noise_alpha no_cuda
    num_completions_to_print num_generations num_generations_eval num_iterations num_train_epochs
    off_policy_mask_threshold optim optim_args optim_target_modules output_dir overwrite_output_dir
    pad_to_multiple_of parallelism_config past_index per_device_eval_batch_size per_device_train_batch_size
    per_gpu_eval_batch_size per_gpu_train_batch_size prediction_loss_only project push_to_hub
    push_to_hub_model_id push_to_hub_organization push_to_hub_token ray_scope ref_model_mixup_alpha
    ref_model_sync_steps remove_unused_columns repetition_penalty report_to
    restore_callback_states_from_checkpoint resume_from_checkpoint reward_funcs reward_model_name_or_path
    reward_weights router_aux_loss_coef run_name sapo_temperature_neg sapo_temperature_pos save_on_each_node
    save_only_model save_safetensors save_steps save_strategy save_total_limit scale_rewards seed
    shuffle_dataset skip_memory_metrics steps_per_generation streaming sync_ref_model temperature
    test_split_size tf32 top_entropy_quantile top_k top_p torch_compile torch_compile_backend torch_compile_mode
    torch_empty_cache_steps torchdynamo tpu_metrics_debug tpu_num_cores trackio_bucket_id trackio_space_id
    trackio_static_space_id train_sampling_strategy transformers_continuous_batching_config trust_remote_code
    use_adaptive_entropy use_bias_correction_kl use_bnb_nested_quant use_cache use_cpu use_dora use_ipex
    use_legacy_prediction_loop use_liger_kernel use_mps_device use_peft use_rslora
    use_transformers_continuous_batching use_transformers_paged use_vllm vespo_k_neg vespo_k_pos
    vespo_lambda_neg vespo_lambda_pos vllm_enable_sleep_mode vllm_gpu_memory_utilization vllm_group_port
    vllm_importance_sampling_cap vllm_importance_sampling_clip_max vllm_importance_sampling_clip_min
    vllm_importance_sampling_correction vllm_importance_sampling_mode vllm_max_model_length vllm_mode
    vllm_model_impl vllm_server_base_url vllm_server_host vllm_server_port vllm_server_timeout
    vllm_structured_outputs_regex vllm_tensor_parallel_size warmup_ratio warmup_steps weight_decay
    """.split()
)

# open-r1's GRPOConfig, ScriptArguments and GRPOScriptArguments, every version, beyond TRL's
OPEN_R1_FIELDS = frozenset(
    """
    benchmarks callbacks chat_template code_eval_scoring_mode code_eval_test_batch_size code_language
    code_provider cosine_max_len cosine_max_value_correct cosine_max_value_wrong cosine_min_value_correct
    cosine_min_value_wrong dataset_mixture dataset_prompt_column e2b_router_url hub_model_revision ioi_provider
    max_completion_len morph_router_url overwrite_hub_revision parallel_code_exec_per_proc push_to_hub_revision
    repetition_max_penalty repetition_n_grams soft_punish_cache system_prompt wandb_entity
    wandb_log_unique_prompts wandb_project wandb_run_group
    """.split()
)

# accelerate launch's options (and TRL's CLI's env, accelerate_config): `trl grpo --config` passes them on
LAUNCH_FIELDS = frozenset(
    """
    accelerate_config aws_access_key_id aws_secret_access_key config_file cpu deepspeed_config_file
    deepspeed_exclusion_filter deepspeed_hostfile deepspeed_inclusion_filter deepspeed_moe_layer_cls_names
    deepspeed_multinode_launcher downcast_bf16 dynamo_backend dynamo_mode dynamo_use_dynamic
    dynamo_use_fullgraph dynamo_use_regional_compilation enable_cpu_affinity env fp8_amax_compute_algo
    fp8_amax_history_len fp8_backend fp8_enable_fsdp_float8_all_gather fp8_format fp8_interval fp8_margin
    fp8_override_linear_precision fp8_pad_inner_dim fp8_use_autocast_during_eval fsdp_activation_checkpointing
    fsdp_activation_checkpointing_offload fsdp_auto_wrap_policy fsdp_backward_prefetch
    fsdp_cpu_ram_efficient_loading fsdp_forward_prefetch fsdp_offload_params fsdp_reshard_after_forward
    fsdp_sharding_strategy fsdp_state_dict_type fsdp_sync_module_states fsdp_use_orig_params fsdp_version
    gpu_ids gradient_clipping log_dir machine_rank main_process_ip main_process_port main_training_function
    max_restarts megatron_lm_attention_backend megatron_lm_attention_dropout
    megatron_lm_attention_softmax_in_fp32 megatron_lm_calculate_per_token_loss megatron_lm_context_parallel_size
    megatron_lm_decoder_last_pipeline_num_layers megatron_lm_eod_mask_loss
    megatron_lm_expert_model_parallel_size megatron_lm_expert_tensor_parallel_size megatron_lm_gradient_clipping
    megatron_lm_hidden_dropout megatron_lm_no_load_optim megatron_lm_no_save_optim megatron_lm_num_micro_batches
    megatron_lm_optimizer_cpu_offload megatron_lm_overlap_cpu_optimizer_d2h_h2d megatron_lm_pp_degree
    megatron_lm_recompute_activations megatron_lm_recompute_granularity megatron_lm_recompute_method
    megatron_lm_recompute_num_layers megatron_lm_sequence_parallelism megatron_lm_tp_degree
    megatron_lm_use_custom_fsdp megatron_lm_use_distributed_optimizer megatron_lm_use_precision_aware_optimizer
    megatron_lm_use_rotary_position_embeddings mixed_precision module monitor_interval mpirun_hostfile multi_gpu
    no_python num_cpu_threads_per_process num_machines num_processes offload_optimizer_device
    offload_optimizer_nvme_path offload_param_device offload_param_nvme_path parallelism_config_cp_backend
    parallelism_config_cp_comm_strategy parallelism_config_cp_size parallelism_config_dp_replicate_size
    parallelism_config_dp_shard_size parallelism_config_sp_attn_implementation parallelism_config_sp_backend
    parallelism_config_sp_seq_length parallelism_config_sp_seq_length_is_variable parallelism_config_sp_size
    parallelism_config_tp_size quiet rdzv_backend rdzv_conf role same_network tee tpu tpu_use_cluster
    tpu_use_sudo use_deepspeed use_fsdp use_megatron_lm use_parallelism_config vm zero3_init_flag
    zero3_save_16bit_model zero_stage
    """.split()
)

TRL_KEYS = TRL_FIELDS | OPEN_R1_FIELDS | LAUNCH_FIELDS


def refusal(key: str, known) -> str | None:
    """Why TRL would refuse recipe key `key`, naming the closest key it reads (difflib); None when TRL reads it or
    it is one of `known` (rlvr's tables, which also hold keys older TRL and open-r1 versions read)."""
    names = TRL_KEYS | set(known)
    if key in names:
        return None
    close = difflib.get_close_matches(key, sorted(names), n=1)
    return (
        "not a key of TRL's GRPOConfig, ModelConfig or script arguments, open-r1's or accelerate launch's, so TRL "
        "would refuse the recipe" + (f"; did you mean {close[0]}?" if close else "")
    )


__all__ = ["TRL_FIELDS", "OPEN_R1_FIELDS", "LAUNCH_FIELDS", "TRL_KEYS", "refusal"]
