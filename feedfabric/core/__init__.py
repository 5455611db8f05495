"""Foundations: settings, models, IDs, errors, event definitions, metrics and logging. Import nothing else of ours."""
