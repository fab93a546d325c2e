"""The assembly: what wires the faces (extender, webhook, controller) over the kernel (`lapilli`) into things
people run — the `lapilli` CLI, the production service (`lapilli serve`), the simulator and the dev cluster.

Nothing below imports from here (import-linter's layers contract: assembly → faces → kernel)."""
