"""What several commands share, below them all (commands never import one another).

May import: every stage (launch .. analysis); never a command module.
"""
