"""Test helper: the run report as headless Chromium renders it (via Selenium and ChromeDriver).

The page is opened from disk the way a person opens it; what the tests read is the rendered
text of its tables and whether each chart image actually decoded.
"""

import dataclasses
import os
import pathlib
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
# No background traffic: this machine's network is closed, and the page needs none.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1200,2000")


@dataclasses.dataclass
class RenderedReport:
    text: str
    tables: dict[str, list[dict[str, str]]]  # table id → rows as {column header: cell text}
    images: dict[str, int]  # src → naturalWidth (0: the image did not load)
    elements: dict[str, str]  # element id → its rendered text


def render(page: str | os.PathLike) -> RenderedReport:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    with tempfile.TemporaryDirectory() as profile:
        options.add_argument(f"--user-data-dir={profile}")
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        try:
            driver.get(pathlib.Path(page).resolve().as_uri())
            tables = {}
            for table in driver.find_elements(By.TAG_NAME, "table"):
                header = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
                tables[table.get_attribute("id")] = [
                    dict(zip(header, [td.text for td in row.find_elements(By.TAG_NAME, "td")],
                             strict=True))
                    for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
            images = driver.execute_script(
                "return Array.from(document.images, i => [i.getAttribute('src'), "
                "i.complete ? i.naturalWidth : 0]);")
            elements = {e.get_attribute("id"): e.text
                        for e in driver.find_elements(By.CSS_SELECTOR, "[id]")}
            return RenderedReport(driver.find_element(By.TAG_NAME, "body").text, tables,
                                  dict(images), elements)
        finally:
            driver.quit()
