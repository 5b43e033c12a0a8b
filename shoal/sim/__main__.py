"""``python -m shoal.sim`` runs the `shoal sim` CLI."""

from shoal.sim.cli import app

if __name__ == "__main__":
    app(prog_name="shoal sim")
