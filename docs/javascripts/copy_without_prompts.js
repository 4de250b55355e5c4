// The copy button of a session snippet copies what a reader types into `python`: the lines
// after the ">>> " and "... " prompts, without the prompts and without the printed output.
// mkdocs-material's button copies an element's `data-copy` text when it has one.
document$.subscribe(() => {
  for (const code of document.querySelectorAll(".highlight code")) {
    const lines = code.textContent.split("\n");
    if (!lines.some((line) => line.startsWith(">>>"))) continue;
    const typed = lines
      .filter((line) => /^(>>>|\.\.\.)( |$)/.test(line))
      .map((line) => line.slice(4));
    code.setAttribute("data-copy", typed.join("\n") + "\n");
  }
});
