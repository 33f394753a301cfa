"""The bootstrap runs on Amazon Linux 2023, the OS of provided.al2023."""

import supply_chain


def test_the_bootstrap_needs_no_library_or_symbol_version_that_al2023_lacks(bootstrap):
    problems, newest = supply_chain.al2023_problems(bootstrap)
    print(f"{bootstrap}: the newest glibc symbol version it needs is {newest}")
    assert problems == []
