"""Independent reference semantics the model checker is tested against."""
