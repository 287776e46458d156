"""Which problems each step trains on, and their token ids.

stream      the seeded prompt stream (uniform or by curriculum); exact resume from its state
curriculum  band samplers: fixed, schedule, adaptive; per-band metrics and plot
curriculum_sim  a simulated policy to test curricula against
chat        a problem's chat messages -> prompt token ids (the tokenizer's chat template, or plain text for a base
            model: model.prompt_format)

In: a task's training problems, the step number. Out: P problems and their prompt ids.
"""
