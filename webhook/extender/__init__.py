"""The Volcano scheduler extender that serves: its HTTP endpoints (`app`), the wire types (`wire`) and each
release's struct keys (`volcano_releases`), the release a request comes from (`release_detection`), answers in the
shape that release reads (`answers`), what fits where (`fit`), gang plans (`placement`, `state`) and scoring
(`scoring`). Volcano's scheduler, emulated to try it, is `webhook.volcano_emulation`, which this package never
imports."""
