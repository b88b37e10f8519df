"""The small Scrapbook set the generator, storage, door and shard tests make: two sets of four
objects, a few images and questions, seconds to generate."""

SMALL = dict(
    n_sets=2,
    objects_per_set=4,
    n_backgrounds=1,
    n_arrangements=2,
    objects_per_image=3,
    n_region_pairs=2,
    n_questions_per_type=1,
)
