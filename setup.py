from setuptools import setup

setup()  # metadata lives in setup.cfg; this shim is for tools that still run setup.py
