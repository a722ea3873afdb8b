"""What several commands share (commands never import one another): it may import every
stage (launch .. analysis), never a command module."""
