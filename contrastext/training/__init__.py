"""Training engine on Hugging Face Accelerate: config, trainer, checkpoints, schedules."""
