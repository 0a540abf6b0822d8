"""Packages: the library `perseval`, and the repository's top-level flows/ and tasks/ installed under perseval's
own names (perseval_flows, perseval_tasks), so no other distribution's `flows` or `tasks` package collides with
them. pyproject.toml holds everything else; its table form cannot map a folder to another package name while
also finding perseval's subpackages."""
from setuptools import find_namespace_packages, setup

setup(packages=[*find_namespace_packages(include=["perseval", "perseval.*"]), "perseval_flows", "perseval_tasks"],
      package_dir={"perseval_flows": "flows", "perseval_tasks": "tasks"})
