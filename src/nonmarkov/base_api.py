"""Module path ``base_api`` of earlier versions; the class lives in
:mod:`nonmarkov.model.api`."""

from .model.api import BaseAPIClass as BaseAPIClass
