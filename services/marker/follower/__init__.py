"""The follower (docs/design.md §6b): watches an unmodified Pulsar's owner znodes and turns every
unlink a broker makes into PDLIs (source OBSERVED) through the marker's publisher."""
