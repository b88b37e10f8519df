"""VQA Lab."""
