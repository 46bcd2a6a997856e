"""Optimizer sessions (diagnosis_patch, reflection, evolution) and the backends that run them."""
